"""HTTP services: the retrieval API (``retrieval_app``) with its Search-R1 adapter, and helpers
to run an app with uvicorn (``serving``). Import the submodules; nothing heavy is loaded here."""
