"""The producer: one fresh process per candidate (or per locked kernel timed beside it), run inside the sandbox.

It imports the candidate under the runtime's module name (``rsi.kernel.module_name``), maps the inputs and output
arenas the judge shared, and runs the candidate when told. It holds no reference, no expected output and no
checker: it reports where the candidate's outputs are (offsets in a judge-owned arena) and, for timed calls, the
CUDA-event time of :func:`rsi.harness.timing.timed_call`. Outputs are allocated through ``rsi.kernel.empty``,
which here carves them out of the current arena with a guard band on each side; the judge fills every arena with
fresh random bytes before each call and checks afterwards that nothing outside the outputs changed. Workspace
(``rsi.kernel.scratch``) comes from the arena's scratch zone at its end, which the judge does not check and refills
like the rest, so nothing in it outlives a call.

Protocol: one :class:`rsi.harness.protocol.Request` per stdin line, one reply per request on a private duplicate
of stdout (the candidate's own output, if any, goes to stderr).
"""

from __future__ import annotations

import os
import resource
import sys
import traceback
from typing import Any

GUARD = 4096       # bytes of guard band before and after every output
ALIGN = 256


class Arena:
    """Bump allocators over one judge-owned uint8 buffer, reset before every call: outputs from its start, scratch
    from its last ``scratch`` bytes."""

    def __init__(self, buf, scratch: int = 0):
        self.buf = buf
        self.limit = buf.numel() - scratch
        self.reset()

    def reset(self) -> None:
        self.top, self.scratch_top = GUARD, self.limit + GUARD

    def alloc(self, shape: tuple[int, ...], dtype, device, scratch: bool = False):
        import torch

        from rsi.harness.wire import make_view

        if torch.device(device) != self.buf.device and not (
                torch.device(device).type == self.buf.device.type == "cuda"):
            raise ValueError(f"output requested on {device}, inputs are on {self.buf.device}")
        esize = torch.empty(0, dtype=dtype).element_size()
        n = 1
        for s in shape:
            n *= s
        start = -(-(self.scratch_top if scratch else self.top) // ALIGN) * ALIGN
        end = start + n * esize
        if scratch and end + GUARD > self.buf.numel():
            raise MemoryError(f"scratch exceeds the {self.buf.numel() - self.limit} bytes the judge gives this "
                              f"call (one copy of each input plus 1 MiB)")
        if not scratch and end + GUARD > self.limit:
            raise MemoryError(f"outputs exceed the {self.limit} bytes the judge sized for this op "
                              f"(the reference's outputs plus slack): allocate only the op's outputs (workspace "
                              f"with K.scratch)")
        if scratch:
            self.scratch_top = end + GUARD
        else:
            self.top = end + GUARD
        stride, acc = [], 1
        for s in reversed(shape):
            stride.append(acc)
            acc *= max(s, 1)
        return make_view(self.buf.untyped_storage(), dtype, shape, tuple(reversed(stride)), start // esize)


class Producer:
    def __init__(self, scratch: str):
        self.scratch = scratch
        self.fn = None
        self.arenas: dict[int, Arena] = {}
        self.inputs: dict[int, tuple] = {}
        self.current: Arena | None = None
        self.flush = None
        self.backend = "interpret"

    # -- requests
    def load(self, args: dict[str, Any]) -> dict[str, Any]:
        import importlib.util

        from rsi import kernel as K

        self.backend = args["backend"]
        if self.backend == "interpret":
            from rsi.harness.interp import patch_interpreter_rounding

            patch_interpreter_rounding()
        name = K.module_name(args["op"])
        path = os.path.join(self.scratch, name + ".py")
        with open(path, "w") as f:
            f.write(args["source"])
        K.set_allocator(self._alloc, self._scratch)
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
            launch = mod.launch
        except Exception as e:  # noqa: BLE001 - any import failure is a compile rejection
            return {"kind": "error", "stage": "compile", "message": f"import failed: {type(e).__name__}: {e}"}
        config = dict(args["config"])
        self.fn = lambda *inputs: launch(*inputs, **config)
        if self.backend == "cuda":
            from rsi.harness.timing import Flusher

            self.flush = Flusher("cuda")
        return {"kind": "ok"}

    def _alloc(self, shape, dtype, device):
        if self.current is None:
            raise RuntimeError("output allocated outside a call")
        return self.current.alloc(shape, dtype, device)

    def _scratch(self, shape, dtype, device):
        if self.current is None:
            raise RuntimeError("scratch allocated outside a call")
        return self.current.alloc(shape, dtype, device, scratch=True)

    def arena(self, args: dict[str, Any]) -> dict[str, Any]:
        import torch

        from rsi.harness.wire import open_storage

        st = open_storage(args["storage"], self.scratch)
        self.arenas[args["id"]] = Arena(torch.empty(0, dtype=torch.uint8, device=st.device).set_(
            st, 0, (st.nbytes(),), (1,)), int(args.get("scratch", 0)))
        return {"kind": "ok"}

    def add_inputs(self, args: dict[str, Any]) -> dict[str, Any]:
        from rsi.harness.wire import open_inputs

        self.inputs[args["id"]] = open_inputs(args["storages"], args["tensors"], self.scratch)
        return {"kind": "ok"}

    def drop(self, args: dict[str, Any]) -> dict[str, Any]:
        for k in args.get("inputs", []):
            self.inputs.pop(k, None)
        for k in args.get("arenas", []):
            self.arenas.pop(k, None)
        self.current = None  # reference counting frees the mappings now (no gc pass: it cost ~70 ms a drop)
        return {"kind": "ok"}

    def _run(self, args: dict[str, Any], mode: str) -> dict[str, Any]:

        from rsi.harness import timing

        inputs = self.inputs[args["inputs"]]
        self.current = self.arenas[args["arena"]]
        self.current.reset()
        if mode == "warm":
            for _ in range(int(args.get("n", 1))):
                self.current.reset()
                self.fn(*inputs)
            self._sync()
            return {"kind": "ok"}
        if mode == "synced":
            ev, through = timing.synced_call(self.fn, inputs, self.flush)
            return {"kind": "sync", "event_us": ev, "through_us": through}
        if mode == "time":
            us, outs, late = timing.timed_call(self.fn, inputs, self.flush)
            reply = {"kind": "timed", "event_us": us, "late": late}
        else:
            outs = self.fn(*inputs)
            self._sync()
            reply = {"kind": "outputs"}
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        reply["outputs"] = [self._describe(o, inputs) for o in outs]
        self.current = None
        return reply

    def _sync(self) -> None:
        if self.backend == "cuda":
            import torch

            torch.cuda.synchronize()

    def _describe(self, o, inputs) -> dict[str, Any]:
        import torch

        from rsi.harness.wire import DTYPE_NAMES

        if type(o) is not torch.Tensor:
            return {"offset": 0, "dtype": "uint8", "shape": [], "stride": [],
                    "foreign": f"not a plain tensor: {type(o).__name__}"}
        base = {"dtype": DTYPE_NAMES.get(o.dtype, "uint8"), "shape": list(o.shape), "stride": list(o.stride())}
        ptr = o.data_ptr()
        a = self.current
        if a is not None and a.buf.data_ptr() <= ptr < a.buf.data_ptr() + a.buf.numel() \
                and o.dtype in DTYPE_NAMES:
            return {**base, "offset": ptr - a.buf.data_ptr(), "foreign": ""}
        for j, x in enumerate(inputs):
            if torch.is_tensor(x) and x.untyped_storage().data_ptr() <= ptr < \
                    x.untyped_storage().data_ptr() + x.untyped_storage().nbytes():
                return {**base, "offset": 0, "foreign": f"aliases input {j} (a view of an input is not a result)"}
        return {**base, "offset": 0, "foreign": "not allocated with rsi.kernel.empty in this call "
                                                "(a buffer from elsewhere or an earlier call)"}


def _limits(cpu_s: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 * 1024**3, 2 * 1024**3))
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))


def main() -> int:
    from rsi.harness import protocol as P

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    scratch = sys.argv[1]
    _limits(int(sys.argv[2]) if len(sys.argv) > 2 else 3600)
    prod = Producer(scratch)
    nonce = cand = ""
    handlers = {P.ARENA: prod.arena, P.INPUTS: prod.add_inputs, P.DROP: prod.drop,
                P.CALL: lambda a: prod._run(a, "call"), P.TIME: lambda a: prod._run(a, "time"),
                P.SYNCED: lambda a: prod._run(a, "synced"), P.WARM: lambda a: prod._run(a, "warm")}
    for line in sys.stdin:
        if not line.strip():
            continue
        req = P.Request.decode(line)
        if req.kind == P.LOAD:
            nonce, cand = req.args["nonce"], req.args["candidate"]
            body = prod.load(req.args)
        elif req.kind == P.EXIT:
            proto.write(P.Reply(nonce, cand, P.OK).encode())
            return 0
        else:
            try:
                body = handlers[req.kind](req.args)
            except Exception as e:  # noqa: BLE001 - a failing candidate is reported, the judge decides
                msg = f"{type(e).__name__}: {e}"
                body = {"kind": "error", "stage": "run", "message": (msg[:1500] + "\n" +
                                                                      traceback.format_exc()[-6000:])}
        outs = tuple(P.OutputDesc(o["offset"], o["dtype"], tuple(o["shape"]), tuple(o["stride"]), o["foreign"])
                     for o in body.get("outputs", []))
        proto.write(P.Reply(nonce, cand, body["kind"], outs, float(body.get("event_us", 0.0)),
                            float(body.get("through_us", 0.0)), bool(body.get("late", False)), body.get("stage", ""),
                            body.get("message", "")).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
