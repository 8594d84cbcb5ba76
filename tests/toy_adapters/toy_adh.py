"""Toy framework adapters, registered by a tiny on-disk distribution (see __init__.py) through the
entry point group `autodiff_harness.frameworks`, exactly as a third-party package would.

Each wraps the engine's static mode and injects one behaviour into `train_step`:
    toy-ok      trains normally
    toy-crash   kills its own process (SIGKILL) at the third step
    toy-hang    sleeps in train_step until the file $TOY_RELEASE exists (an hour at most)
    toy-nan     returns a NaN loss from the third step on
    toy-error   raises RuntimeError at the second step
    toy-dense   trains normally, but supports float32 dense models only (`supports`, `dtypes`)
When $TOY_MARKER_DIR is set, every adapter writes `<name>.<pid>.init` (holding the thread
variables it saw) when it is built, and toy-hang writes `toy-hang.<pid>.hanging` before it hangs:
tests count worker launches and know when a case is in flight. With $TOY_CHATTY set, every step
prints about 130 kB to stdout.
"""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from harness.contract.frameworks.engine import EngineStatic


class ToyOk(EngineStatic):
    name = "toy-ok"
    description = "toy adapter: trains normally"

    def __init__(self, spec, weights, dtype, threads) -> None:
        super().__init__(spec, weights, dtype, threads)
        self.step = 0
        env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
        self._mark("init", json.dumps(env))

    def _mark(self, what: str, text: str = "") -> None:
        folder = os.environ.get("TOY_MARKER_DIR")
        if folder:
            Path(folder, f"{self.name}.{os.getpid()}.{what}").write_text(text)

    def train_step(self, x, y):
        self.step += 1
        if os.environ.get("TOY_CHATTY"):  # a framework that writes a lot to stdout
            print(("chatter " * 16 + "\n") * 1000, end="", flush=True)
        self.before_step()
        busy = float(os.environ.get("TOY_BUSY_S", 0))  # a step that computes on one core
        until = time.perf_counter() + busy
        while time.perf_counter() < until:
            pass
        if os.environ.get("TOY_STEP_LOG"):  # which framework stepped when (taking turns)
            with open(os.environ["TOY_STEP_LOG"], "a") as log:
                log.write(f"{self.spec.name}/{self.name}\n")
        loss, outputs = super().train_step(x, y)
        return self.loss_after(loss), outputs

    def facts(self):
        return json.loads(os.environ.get("TOY_FACTS", "{}"))  # what the test has it report

    def before_step(self) -> None:
        pass

    def loss_after(self, loss: float) -> float:
        return loss


class ToyCrash(ToyOk):
    name = "toy-crash"

    def before_step(self) -> None:
        if self.step == 3:
            os.kill(os.getpid(), signal.SIGKILL)


class ToyHang(ToyOk):
    name = "toy-hang"

    def before_step(self) -> None:
        release = os.environ.get("TOY_RELEASE")
        if release and os.path.exists(release):
            return
        self._mark("hanging")
        until = time.monotonic() + 3600
        while time.monotonic() < until and not (release and os.path.exists(release)):
            time.sleep(0.1)


class ToyNan(ToyOk):
    name = "toy-nan"

    def loss_after(self, loss: float) -> float:
        return float("nan") if self.step >= 3 else loss


class ToyError(ToyOk):
    name = "toy-error"

    def before_step(self) -> None:
        if self.step == 2:
            raise RuntimeError("toy adapter exploded at step 2")


class ToyDense(ToyOk):
    name = "toy-dense"
    description = "toy adapter: dense layers in float32 only"
    dtypes = ("float32",)

    @classmethod
    def supports(cls, spec):
        kinds = sorted({layer.kind for layer in spec.layers} - {"dense"})
        return f"no {', '.join(kinds)} layers" if kinds else None


ADAPTERS = {cls.name: cls for cls in (ToyOk, ToyCrash, ToyHang, ToyNan, ToyError, ToyDense)}
