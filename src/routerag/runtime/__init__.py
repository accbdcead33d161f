"""What a strategy runs on, shared by the strategies and the episode engine: the ``Strategy`` /
``StrategyContext`` types and the strategy registry (``runtime.base``), the step helpers that call
the model and the sources and record each step in the trace (``runtime.loop``), and the answer
and query clean-up over the tag protocol (``runtime.parsing``). It sits below ``episode``,
``routing`` and ``strategies`` and imports none of them."""
