"""The judge: creates inputs, holds the references, compares every output, decides. It never imports candidates.

Each candidate runs in a fresh producer process (``rsi.harness.producer``) inside the sandbox
(``rsi.harness.jail``). The judge shares with it only the inputs of each trial and the output arenas
(``rsi.harness.wire``), fills every arena with fresh random bytes before each call, and after the call checks
the outputs against the reference, the guard bands and the whole storage of every input. Timing interleaves the
candidate's producer, the locked kernel's producer and the judge's own baselines in lockstep
(``rsi.harness.timing.interleave``); a random sample of the timed calls, chosen after each call, is compared too.
The judge's baselines are eager, torch.compile of the reference, a copy of the same bytes and the op group's
incumbents (``OpGroup.baselines``), each incumbent checked once per shape first (``rsi.harness.incumbents``).

Stages, fail closed: static -> compile -> correctness -> timing -> physics. The verdict starts rejected.

CuTe DSL candidates (docs/cute.md) go the same way, with the CuTe allow-list (``rsi.harness.static_cute``) in the
static stage; they run only on the GPU with the ``[cute]`` extra installed (else a compile rejection that says so),
and compile in their first call like Triton kernels. Every verdict names the kernel language (``details``).
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

import torch

from rsi.contract import ACCEPT, Candidate, OpGroup, Shape, ToleranceClass, Verdict, tighten
from rsi.harness import check, incumbents, jail
from rsi.harness import protocol as P
from rsi.harness.client import (
    AliasEntry,
    Arenas,
    ProducerClient,
    RemoteEntry,
    StageError,
    _trim,
    arena_bytes,
    guard_violation,
    outputs_from,
    scratch_bytes,
)
from rsi.harness.static import check_source
from rsi.harness.static_cute import kernel_language
from rsi.harness.wire import SharedMemory
from rsi.kernel import cute_unavailable, cutlass_dsl_version
from rsi.refs import get_op_group
from rsi.search.stats import paired_ratio_ci

N_SEEDS = 5


@dataclass
class JudgeOptions:
    backend: str = "interpret"                  # "cuda" | "interpret"
    timeout_s: float = 600.0                    # per producer request
    unsafe_no_sandbox: bool = False             # run LLM candidates although bwrap is unavailable
    seeds: tuple[int, ...] | None = None        # None: drawn fresh (recorded in every verdict for replay)
    drawn_shapes: int = 2                       # extra shapes drawn per run from the op's admissible set
    check_fraction: float = 0.25                # share of timed calls whose outputs are compared
    huge: bool = False                          # add the op group's > 2^31-element shapes (GPU suite)
    skip_static: bool = False                   # tests only: prove the run-time defences stand alone
    target: str | None = None                   # GPU target whose peaks the physics gate uses
    measure: bool = True                        # False: correctness only, also on CUDA (GPU suite)
    # op -> bounds of its approximate class tightened by the search space ([<op>.approximate], rsi.spaces); checked
    # with rsi.contract.tighten when the judge is made (a looser bound raises there)
    approximate: dict[str, dict[str, float]] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=lambda: {"warmup": 5, "reps": 40, "input_sets": 2})


# ------------------------------------------------------------------------------------------------ the judge
class Judge:
    """Judges candidates of any op group; holds per-run state (seeds, compiled baselines, copy bandwidth)."""

    def __init__(self, options: JudgeOptions | None = None):
        self.opt = options or JudgeOptions()
        self.device = torch.device("cuda" if self.opt.backend == "cuda" else "cpu")
        if self.opt.backend == "interpret":
            # references that are Triton kernels (lora_consumer's) run here, in the judge: under the same
            # interpreter semantics as the producers (GPU rounding), or the judge compares two different machines
            # (seen: a fresh `rsi verify` rejected the locked lora_consumer at 220 of 576 bytes for some seeds)
            from rsi.harness.interp import patch_interpreter_rounding

            patch_interpreter_rounding()
        self.seeds = tuple(self.opt.seeds) if self.opt.seeds else tuple(secrets.randbelow(2**31)
                                                                         for _ in range(N_SEEDS))
        self.run_seed = secrets.randbits(63)
        self.secret = random.Random(secrets.randbits(64))  # which timed calls get checked: never recorded
        ok, why = jail.available()
        self.sandbox, self.sandbox_why = ok, why
        self.scratch_root = tempfile.mkdtemp(prefix="rsi-judge-")
        self.mem = SharedMemory(self.device)
        self._compiled: dict[str, Callable] = {}
        self._vetted: dict[tuple[str, str], tuple[list, dict]] = {}  # (op, shape key) -> incumbents.vet's result
        self.tolerances = {name: tighten(get_op_group(name).tolerance, bounds)
                           for name, bounds in self.opt.approximate.items()}
        self.copy_bw: dict[str, float] | None = None
        self._ids = 0
        # the judge's own results per correctness trial, reused by the run's next candidates (the trial's inputs
        # are a function of its seed, so these are too): host memory up to a cap, the rest recomputed
        self._expected: dict[tuple, tuple] = {}
        self._expected_bytes = 0
        self._expected_cap = int(float(os.environ.get("RSI_JUDGE_CACHE_GB", "40")) * 2**30)

    def close(self) -> None:
        shutil.rmtree(self.scratch_root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def tolerance_of(self, op: OpGroup) -> ToleranceClass:
        """The class candidates of ``op`` are judged by: the op group's, or its search space's tightened one."""
        return self.tolerances.get(op.name, op.tolerance)

    def _id(self) -> int:
        self._ids += 2
        return self._ids

    def describe(self) -> dict[str, Any]:
        return {"sandbox": f"bwrap ({jail.level()})" if self.sandbox else f"none ({self.sandbox_why})",
                "unsafe_no_sandbox": self.opt.unsafe_no_sandbox and not self.sandbox, "seeds": list(self.seeds),
                "run_seed": self.run_seed, "producer": "fresh process per candidate"}

    # -------------------------------------------------------------------------------------------- entry point
    def evaluate(self, cand: Candidate, best: Candidate | None = None) -> dict[str, Any]:
        t_start = time.perf_counter()
        op = get_op_group(cand.op)
        v = Verdict(candidate=cand.hash)
        tol = self.tolerance_of(op)
        v.tolerance = tol.describe()
        v.details["judge"] = self.describe()
        v.details["kernel_language"] = kernel_language(cand.source)
        clients: list[ProducerClient] = []
        try:
            if not self.opt.skip_static:
                st = check_source(cand.source)
                if not st.ok:
                    raise StageError("static", f"{st.reason} (line {st.line})")
            if v.details["kernel_language"] == "cute":
                why = cute_unavailable(self.opt.backend)
                if why:
                    raise StageError("compile", why)
                v.details["cutlass_dsl"] = cutlass_dsl_version()
            if not self.sandbox and cand.origin not in ("offline", "verified") and not self.opt.unsafe_no_sandbox:
                raise StageError("static", f"sandbox unavailable ({self.sandbox_why}): candidates from "
                                           f"{cand.origin!r} run only in the sandbox; pass --unsafe-no-sandbox "
                                           f"to run them anyway (every record then says so)")
            client = self._spawn(cand)
            clients.append(client)
            corr = self.correctness(op, client)
            v.details["correctness"] = corr
            v.tolerance = {**tol.describe(), "observed": corr["observed"], "deterministic": True}
            if self.opt.backend == "cuda" and self.opt.measure:
                best_client = None
                if best is not None:
                    try:
                        best_client = self._spawn(best)
                    except (StageError, P.ProtocolError) as e:
                        raise StageError("incumbent", f"the locked kernel failed to start, not the candidate "
                                                      f"({getattr(e, 'reason', e)}); the candidate was not timed")
                    clients.append(best_client)
                t0 = time.perf_counter()
                rows, checked = self.timing(op, client, best_client)
                v.timings = rows
                if op.baselines:
                    v.details["incumbents"] = {s.name: self._vetted[(op.name, s.key())][1] for s in op.shapes
                                               if (op.name, s.key()) in self._vetted}
                v.details["timing_wall_s"] = time.perf_counter() - t0
                v.details["timed_outputs_checked"] = checked
                v.details["copy_bw"] = self.copy_bw
                from rsi.harness.gates import physics_gate

                why = physics_gate(rows, op, self.copy_bw, {**self.opt.timing, "target": self.opt.target})
                if why:
                    raise StageError("physics", why)
            else:
                v.details["timing"] = "not measured (" + ("Triton interpreter: " if self.opt.backend != "cuda"
                                                          else "measure=False: ") + "correctness only)"
            for c in clients:
                why = c.close()
                if why:
                    raise StageError("protocol", why)
            timed = self.opt.backend == "cuda" and self.opt.measure
            v.status, v.stage, v.reason = ACCEPT, "accepted", "correct under the class" + (
                "; timed" if timed else "; timing not measured (" + (
                    "interpreter)" if self.opt.backend != "cuda" else "measure=False)"))
        except StageError as e:
            v.stage, v.reason = e.stage, e.reason
            v.details.update(e.details)
        except P.ProtocolError as e:
            v.stage, v.reason = "protocol", f"protocol violation: {e}"
        except Exception as e:  # noqa: BLE001 - a judge-side failure (e.g. out of memory) rejects this candidate only
            import traceback

            v.stage = "judge"
            v.reason = f"the judge failed on this candidate: {type(e).__name__}: {_trim(str(e))}"
            v.details["traceback"] = traceback.format_exc()[-4000:]
        finally:
            for c in clients:
                c.release_all()  # CUDA IPC frees the judge's buffers only once the producer has let go of them
                c.kill()
                c.close()
        v.details["judge_wall_s"] = time.perf_counter() - t_start
        return v.to_json()

    def _spawn(self, cand: Candidate) -> ProducerClient:
        c = ProducerClient(cand, self.opt.backend, self.sandbox, self.opt.timeout_s, self.scratch_root)
        c.request(P.LOAD, {"nonce": c.nonce, "candidate": cand.hash, "op": cand.op, "source": cand.source,
                           "config": dict(cand.config), "backend": self.opt.backend})
        return c

    # -------------------------------------------------------------------------------------------- correctness
    def trial_plan(self, op: OpGroup) -> list[tuple[Shape, int, int, Any, bool]]:
        """(shape, layout, seed, special case or None, refill) for every correctness trial of this run."""
        cuda = self.opt.backend == "cuda"
        shapes = list(op.shapes) + list(op.odd_shapes) if cuda else list(op.interp_shapes)
        sampler = getattr(op, "sample_shapes", None)
        if sampler is not None and self.opt.drawn_shapes:
            shapes += list(sampler(random.Random(self.run_seed), self.opt.backend, self.opt.drawn_shapes))
        if self.opt.huge and cuda:
            shapes += list(getattr(op, "huge_shapes", ()))
        n_layouts = int(getattr(op, "n_layouts", 1))
        named = {s.name for s in (op.shapes if cuda else op.interp_shapes)}
        plan = []
        for shape in shapes:
            full = shape.name in named or shape in op.odd_shapes
            seeds = self.seeds if full else self.seeds[:1]
            plan += [(shape, 0, s, None, False) for s in seeds]
            if full:  # the refill reuses the buffers of the seed trial just before it (same layout, same sizes)
                plan.append((shape, 0, self.seeds[-1] + 7919, None, True))
                if cuda and shape.name in tuple(getattr(op, "heavy_shapes", ())):
                    continue   # specials and layouts at the other named shapes (OpGroup.heavy_shapes)
                plan += [(shape, 0, self.seeds[0], sc, False) for sc in op.special_cases]
                plan += [(shape, lay, self.seeds[1 % len(self.seeds)], None, False) for lay in range(1, n_layouts)]
        return plan

    def _expected_of(self, op: OpGroup, tol, key: tuple, inputs: tuple) -> tuple[tuple, tuple, tuple]:
        """(references, oracles, term scales) of one trial: computed here, or the copy kept from an earlier
        candidate of this run (same op, shape, layout, seed, case: the same inputs)."""
        key = (op.name, *key)
        hit = self._expected.get(key)
        if hit is not None:
            return tuple(tuple(None if t is None else t.to(self.device, copy=True) for t in part)
                         for part in hit)
        refs = check.as_tuple(op.reference(*inputs))
        oracles = check.as_tuple(op.oracle(*inputs)) if check.needs_oracle(tol) else (None,) * len(refs)
        scales = check.term_scales(op, inputs, len(refs))
        parts = (refs, oracles, scales)
        n = sum(t.numel() * t.element_size() for part in parts for t in part if torch.is_tensor(t))
        if self._expected_bytes + n <= self._expected_cap and all(
                t is None or torch.is_tensor(t) for part in parts for t in part):
            self._expected[key] = tuple(tuple(None if t is None else t.detach().to("cpu", copy=True) for t in part)
                                        for part in parts)
            self._expected_bytes += n
        return parts

    def _make(self, op: OpGroup, shape: Shape, seed: int, layout: int) -> tuple:
        if layout:
            return op.make_inputs(shape, seed, self.device, layout=layout)
        return op.make_inputs(shape, seed, self.device)

    def correctness(self, op: OpGroup, client: ProducerClient) -> dict[str, Any]:
        per: dict[str, list[dict[str, float]]] = {"seeds": [], "special": []}
        tol = self.tolerance_of(op)
        gen = torch.Generator(device=self.device).manual_seed(self.run_seed)
        plan = self.trial_plan(op)
        n_calls = 3 if self.opt.backend == "cuda" else 2
        shared_prev = None  # (shape, layout, shared inputs, input id) for the refill trial
        calls = 0
        arenas: Arenas | None = None
        for shape, layout, seed, special, refill in plan:
            where = f"shape {shape.key()} layout {layout} case " + (
                "refill" if refill else (special.name if special else f"seed{seed}"))
            inputs = self._make(op, shape, seed, layout)
            if special is not None:
                inputs = special.apply(inputs, tuple(op.special_inputs))
            if refill and shared_prev is not None and shared_prev[0] == shape and shared_prev[1] == 0:
                shared, in_id = shared_prev[2], shared_prev[3]
                _refill(shared, inputs)
            else:
                if shared_prev is not None:
                    client.request(P.DROP, {"inputs": [shared_prev[3]]})
                shared, sdescs, idescs = self.mem.share_inputs(inputs, client.scratch)
                in_id = self._id()
                client.request(P.INPUTS, {"id": in_id, "storages": sdescs, "tensors": idescs})
            shared_prev = (shape, layout, shared, in_id)
            refs, oracles, scales = self._expected_of(op, tol, (shape.key(), layout, seed, special and special.name,
                                                                refill), inputs)
            need, spare = arena_bytes(refs), scratch_bytes(inputs)
            if arenas is None or (arenas.nbytes, arenas.scratch) != (need, spare):  # reused within one shape
                if arenas is not None:
                    arenas.release()
                arenas = Arenas(self.mem, client, need, gen, self._id(), spare)
            first = None
            for k in range(n_calls):   # the refill trial's arenas are the runtime's: the last call's as it was
                if refill and k == 0:    # left (a block the caching allocator hands back), then zeros (fresh memory)
                    aid, buf, fill = arenas.again(keep_fill=True)
                else:
                    aid, buf, fill = arenas.next(keep_fill=True, zeros=refill and k == 1)
                try:
                    reply = client.request(P.CALL, {"inputs": in_id, "arena": aid}, expect=P.OUTPUTS)
                except StageError as e:
                    if calls == 0 and _compiler_failure(e):  # Triton and CuTe compile on the first launch
                        e.stage = "compile"
                    e.reason = f"{e.reason} at {where}"
                    raise
                calls += 1
                outs = outputs_from(reply, buf, arenas.nbytes)
                ok, why = check.check_structure(outs, refs)
                if not ok:
                    raise StageError("correctness", f"{why} at {where}")
                for i, o in enumerate(outs):
                    for j, o2 in enumerate(outs[:i]):
                        if check.overlaps(o, o2):
                            raise StageError("correctness", f"outputs {j} and {i} overlap at {where}")
                bad = guard_violation(buf, fill, outs, arenas.nbytes)
                if bad:
                    raise StageError("correctness", f"{bad} at {where}")
                bad = _inputs_changed(inputs, shared)
                if bad:
                    raise StageError("correctness", f"{bad} at {where}")
                if first is None:
                    for i, (o, r, orc, sc) in enumerate(zip(outs, refs, oracles, scales)):
                        ok, stats, why = check.compare(o, r, orc, tol, term_scale=sc)
                        if not ok:
                            raise StageError("correctness", f"{why} (output {i}) at {where}", {"error": stats})
                        per["seeds" if special is None else "special"].append(stats)
                    first = tuple(o.clone() for o in outs)
                else:
                    for i, (a, b) in enumerate(zip(first, outs)):
                        if not check.bitwise_equal(a, b):
                            raise StageError("correctness", f"non-deterministic: call {k + 1} differs from call 1 "
                                                            f"(output {i}) at {where}")
        if arenas is not None:
            arenas.release()
        if shared_prev is not None:
            client.request(P.DROP, {"inputs": [shared_prev[3]]})
        return {"trials": len(plan), "calls_per_trial": n_calls, "seeds": list(self.seeds),
                "shapes": sorted({p[0].key() for p in plan}), "layouts": int(getattr(op, "n_layouts", 1)),
                "special_cases": [sc.name for sc in op.special_cases], "observed": check.worst(per["seeds"]),
                "observed_special": check.worst(per["special"])}

    # -------------------------------------------------------------------------------------------- timing
    def _compiled_reference(self, op: OpGroup) -> Callable:
        if op.name not in self._compiled:
            self._compiled[op.name] = torch.compile(op.reference, dynamic=False)
        return self._compiled[op.name]

    def _incumbents(self, op: OpGroup, shape: Shape, private: list[tuple], refs: list[tuple],
                    flush: Callable[[], None]) -> list:
        """Timing entries of the op group's incumbents at this shape: vetted once per shape and judge on the first
        input set (``incumbents.vet``); one whose ``prepare`` raises on another set is dropped too, with the reason."""
        from rsi.harness import timing as T

        key = (op.name, shape.key())
        if key not in self._vetted:
            self._vetted[key] = incumbents.vet(op, self.tolerance_of(op), private[0], refs[0])
        passed, report = self._vetted[key]
        entries = []
        for b in list(passed):
            try:
                sets = [b.args(s) for s in private]
            except Exception as e:  # noqa: BLE001 - dropped and recorded, as in vet
                report[b.name] = {"timed": False, "reason": f"prepare {incumbents._why(e)}"}
                passed.remove(b)
                continue
            entries.append(T.LocalEntry(b.name, b.fn, sets, flush))
        return entries

    def timing(self, op: OpGroup, client: ProducerClient, best: ProducerClient | None) -> tuple[list, int]:
        from rsi.harness import timing as T

        if self.copy_bw is None:
            self.copy_bw = T.measure_copy_bandwidth(self.device)
        params = self.opt.timing
        gen = torch.Generator(device=self.device).manual_seed(self.run_seed + 1)
        flush = T.Flusher(self.device)
        rows, checked = [], 0
        for shape in op.shapes:
            n_sets = int(params.get("input_sets", 2))
            private = [op.make_inputs(shape, self.seeds[k % len(self.seeds)] + 1000 + k, self.device)
                       for k in range(n_sets)]
            refs = [check.as_tuple(op.reference(*s)) for s in private]
            nbytes = op.bytes_moved(shape)
            remote = []
            for name, c in (("candidate", client), ("best", best)):
                if c is None:
                    continue
                ids = []
                shared_sets = []
                for s in private:
                    sh, sdescs, idescs = self.mem.share_inputs(s, c.scratch)
                    k = self._id()
                    c.request(P.INPUTS, {"id": k, "storages": sdescs, "tensors": idescs})
                    ids.append(k)
                    shared_sets.append(sh)
                arenas = Arenas(self.mem, c, arena_bytes(refs[0]), gen, self._id(), scratch_bytes(private[0]))
                ent = RemoteEntry(name, c, ids, arenas, (refs, private) if name == "candidate" else None, op,
                                  self.secret, self.opt.check_fraction, self.tolerance_of(op))
                remote.append((ent, shared_sets))
            entries = [e for e, _ in remote]
            if remote:
                entries.append(AliasEntry("aa", remote[0][0]))
            if op.reference_timed:
                entries += [T.LocalEntry("eager", op.reference, private, flush),
                            T.LocalEntry("compile", self._compiled_reference(op), private, flush)]
            entries.append(T.LocalEntry("copy", T.same_bytes_copy(nbytes, self.device), private, flush))
            entries += self._incumbents(op, shape, private, refs, flush)
            samples = T.interleave(entries, n_sets, warmup=int(params.get("warmup", 5)),
                                   reps=int(params.get("reps", 40)), sync_reps=int(params.get("sync_reps", 10)),
                                   seed=self.run_seed & 0xFFFF)
            for ent, shared_sets in remote:
                for s, sh in zip(private, shared_sets):
                    bad = _inputs_changed(s, sh)
                    if bad:
                        raise StageError("correctness", f"{bad} during timing at {shape.key()}")
                ent.release()
            cand_ent = remote[0][0]
            checked += cand_ent.checked
            rows.append(_row(op, shape, samples, nbytes, self.copy_bw, params, cand_ent))
        return rows, checked


def _compiler_failure(e: StageError) -> bool:
    """An exception the candidate raised from inside Triton (its compiler or language front end) or CuTe DSL (its
    tracer and compiler, under cutlass/): the first launch is where a kernel compiles, so such a failure there is a
    compile rejection, not a wrong result."""
    tb = e.details.get("traceback", "")
    return e.stage == "correctness" and "producer_stage" in e.details and (
        "/triton/compiler/" in tb or "/triton/language/" in tb or "CompilationError" in e.reason
        or "InterpreterError" in e.reason or "/cutlass/" in tb or "DSLRuntimeError" in e.reason
        or "DSLUserCodeError" in e.reason)


def _refill(shared: tuple, inputs: tuple) -> None:
    """Write new values into the same shared buffers (the refill trial)."""
    done = set()
    for sh, x in zip(shared, inputs):
        if not torch.is_tensor(sh):
            if sh != x:
                raise ValueError(f"refill changes a scalar input ({sh!r} -> {x!r}); the producer would keep the old")
            continue
        st, src = sh.untyped_storage(), x.untyped_storage()
        if st.data_ptr() in done:
            continue
        done.add(st.data_ptr())
        n = src.nbytes()
        if n != st.nbytes():
            raise ValueError("refill inputs have another storage size")
        dst = torch.empty(0, dtype=torch.uint8, device=sh.device).set_(st, 0, (n,), (1,))
        dst.copy_(torch.empty(0, dtype=torch.uint8, device=x.device).set_(src, 0, (n,), (1,)))


def _inputs_changed(private: tuple, shared: tuple) -> str:
    """Every byte of every shared input storage must still equal the judge's private original."""
    seen = set()
    for j, (x, sh) in enumerate(zip(private, shared)):
        if not torch.is_tensor(x):
            continue
        st = sh.untyped_storage()
        if st.data_ptr() in seen:
            continue
        seen.add(st.data_ptr())
        a = torch.empty(0, dtype=torch.uint8, device=sh.device).set_(st, 0, (st.nbytes(),), (1,))
        src = x.untyped_storage()
        b = torch.empty(0, dtype=torch.uint8, device=x.device).set_(src, 0, (src.nbytes(),), (1,))
        if not torch.equal(a, b):
            return f"input {j} was modified by the candidate (its storage differs from the judge's copy)"
    return ""


def _row(op: OpGroup, shape: Shape, samples: dict, nbytes: int, copy_bw: dict, params: dict,
         cand: RemoteEntry) -> dict[str, Any]:
    from rsi.harness import timing as T

    cs = samples["candidate"]
    row: dict[str, Any] = {"shape": shape.to_json(), "bucket": shape.name, "method": T.METHOD,
                           "warmup": int(params.get("warmup", 5)), "iters": int(params.get("reps", 40)),
                           "bytes": nbytes, "flops": int(op.flops(shape)), "copy_gbps": copy_bw["gbps"]}
    row.update(cs.summary())
    row["gbps"] = nbytes / (row["p50_us"] * 1e-6) / 1e9
    row["pct_copy"] = 100.0 * row["gbps"] / copy_bw["gbps"]
    row["baselines"] = {}
    for name, s in samples.items():
        if name == "candidate":
            continue
        med, lo, hi = paired_ratio_ci(s.times_us, cs.times_us)
        sm = s.summary()
        row["baselines"][name] = {**sm, "speedup": med, "ci95": [lo, hi],
                                  "gbps": nbytes / (sm["p50_us"] * 1e-6) / 1e9,
                                  "pct_copy": 100.0 * nbytes / (sm["p50_us"] * 1e-6) / 1e9 / copy_bw["gbps"]}
    pairs = [(w, e) for w, e in zip(cand.wall_us, cand.event_us) if e > 0]
    row["wall_min_ratio"] = min((w / e for w, e in pairs), default=float("nan"))
    row["event_sum_us"] = sum(cand.event_us)
    row["wall_sum_us"] = sum(cand.wall_us)
    row["timed_outputs_checked"] = cand.checked
    row["hidden_work_gap_us"] = T.hidden_work_gap(cs, [s for n, s in samples.items()
                                                        if n in ("eager", "compile", "copy")])
    # every timed call in repetition order (the same input set per index in every run): rsi nightly pairs them
    row["samples_us"] = {name: list(s.times_us) for name, s in samples.items()}
    return row
