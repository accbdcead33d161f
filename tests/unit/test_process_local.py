"""ProcessLocal: one build per process, pickled as its configuration (what Ray actors receive)."""

from __future__ import annotations

import pickle
import threading

from routerag.llm.config import ModelConfig
from routerag.llm.factory import DeferredModel
from routerag.process_local import ProcessLocal


class Counted(ProcessLocal[str, list[str]]):
    builds = 0

    def _build(self) -> list[str]:
        Counted.builds += 1
        return [self.config]


def test_builds_once_across_threads_and_pickles_as_its_configuration() -> None:
    Counted.builds = 0
    local = Counted("cfg")
    got: list[list[str]] = []
    threads = [threading.Thread(target=lambda: got.append(local.value())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert Counted.builds == 1 and all(v is got[0] for v in got)
    state = pickle.dumps(local)
    assert b"cfg" in state and pickle.loads(state).__dict__["_value"] is None  # the built value stays behind
    copy = pickle.loads(state)
    assert copy.value() == ["cfg"] and copy.value() is not got[0] and Counted.builds == 2


def test_deferred_model_builds_nothing_until_its_first_chat() -> None:
    model = DeferredModel(ModelConfig(backend="llamacpp", model="m"))  # no such file: building it would fail
    assert model.name == "m"
    copy = pickle.loads(pickle.dumps(model))
    assert copy.config == model.config and copy.name == "m"
