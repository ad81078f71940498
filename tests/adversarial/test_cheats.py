"""Every cheating candidate of tests/adversarial/cheats.py is rejected, each for its own reason; honest ones pass.

Two module-scoped judges serve every test (a Judge is reusable; each candidate still gets a fresh producer process
in the sandbox): ``judge`` runs the whole pipeline, ``runtime`` switches the static check off (``skip_static``, a
test-only switch) to prove that the run-time defences (process split, sandbox, comparisons) stand on their own
even if the allow-list were bypassed. Every full-Python cheat is also judged with the static check on and must be
rejected there.

Sandbox probes (files, network, environment, the judge's memory, a process left behind) report what they achieved
in an exception message: the verdict's reason then says "PROBE-BLOCKED ..." when every attempt failed and
"PROBE-ESCAPED ..." with what got out otherwise; their tests also check the host side (the file, the listener,
the process table) independently of what the candidate says.

Run with TRITON_INTERPRET=1 (the README's test command sets it).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from rsi.contract import Candidate
from rsi.harness import jail
from rsi.harness.judge import Judge, JudgeOptions
from tests.adversarial import cheats
from tests.adversarial.verdicts import GARBAGE, expect_accepted, expect_rejected

pytestmark = pytest.mark.interpreter
# the sandbox probes need bubblewrap (.ci/run installs it); without it they are skipped, and the README says that
# LLM candidates are then refused
needs_sandbox = pytest.mark.skipif(not jail.available()[0], reason=f"no producer sandbox: {jail.available()[1]}")


@pytest.fixture(scope="module")
def judge():
    with Judge(JudgeOptions(backend="interpret")) as j:
        yield j


@pytest.fixture(scope="module")
def runtime():
    with Judge(JudgeOptions(backend="interpret", skip_static=True)) as j:
        yield j


def evaluate(j: Judge, source: str, op: str = "swiglu", config: dict | None = None) -> dict:
    return j.evaluate(Candidate(op, source, config or {}, origin="offline"))


# ------------------------------------------------------------------------------------------------ run-time cheats
# (cheat, op, static check skipped, expected stage, reason words (any of))
RUNTIME_CHEATS = [
    # 1. sharing the judge's process: patches, forgeries and searches act on the producer only
    ("PATCH_CHECK", "swiglu", True, "correctness", "max-abs error"),
    ("PATCH_TORCH", "swiglu", True, "correctness", "max-abs error"),
    ("TORCH_FUNCTION_MODE", "swiglu", True, "correctness", "max-abs error"),
    ("FRAME_GC_SEARCH", "swiglu", True, "correctness", "max-abs error"),
    ("FORGE_STDOUT", "swiglu", True, "correctness", "max-abs error"),  # the forgery never reaches the channel
    ("FORGE_ALL_FDS", "swiglu", True, "protocol", "wrong nonce"),
    ("STOLEN_NONCE_TWO_REPLIES", "swiglu", True, "protocol", "more than one message"),
    ("STOLEN_NONCE_FORGED_REPLY", "swiglu", True, "correctness", "max-abs error"),  # a reply is only a location
    ("EXIT_EARLY", "swiglu", True, "crash", "exit code 0"),
    ("SYS_EXIT", "swiglu", True, "crash", "exit code 0"),
    ("EXIT_AT_IMPORT", "swiglu", True, "crash", "exit code 0"),
    ("JUDGE_MEMORY", "swiglu", True, "correctness", "PROBE-BLOCKED"),
    # 3. the harness is recognisable
    ("fixed_seeds", "swiglu", False, "correctness", "max-abs error"),
    ("NAMED_SHAPES", "swiglu", False, "correctness", "drawn"),
    ("FIRST_N_CALLS", "swiglu", True, "correctness", GARBAGE),
    ("ODD_CALLS", "swiglu", True, "correctness", "non-deterministic"),
    ("INPUT_CACHE", "swiglu", True, "correctness", "case refill"),
    # 4. aggregate error bounds: the per-element bound
    ("FLUSH_SMALL", "swiglu", False, "correctness", "per-element"),
    ("THIRD_3BIT", "swiglu", False, "correctness", "per-element"),
    ("TRUNC_BF16", "swiglu", False, "correctness", ("max-abs error", "relative-L2", "per-element", "rounding bias")),
    ("TRUNC_ALL_BF16", "swiglu", False, "correctness", ("max-abs error", "relative-L2", "per-element", "rounding bias")),
    ("QK_FLUSH_SMALL", "qk_norm_rope", False, "correctness", "per-element"),
    # 5. input coverage
    ("CONTIGUOUS_ROWS", "swiglu", False, "correctness", "layout 1"),
    ("QK_ASSUMED_ROW_STRIDE", "qk_norm_rope", False, "correctness", "layout 1"),
    ("QK_NAN_WEIGHT", "qk_norm_rope", False, "correctness", "case nonfinite"),
    ("QK_SCRATCH_IN_V", "qk_norm_rope", False, "correctness", "input 0 was modified"),
    ("ROW_PADDING_SCRATCH", "swiglu", False, "correctness", "input 0 was modified"),
    ("WRITE_PAST_END", "swiglu", False, "correctness", "outside the outputs"),
    ("WRITE_PAST_END_TMA", "swiglu", False, "correctness", "outside the outputs"),
    ("WRITE_BEFORE_START", "swiglu", False, "correctness", "outside the outputs"),
    ("UNWRITTEN_TAIL", "swiglu", False, "correctness", GARBAGE),
    ("RETURNS_VIEW", "swiglu", False, "correctness", "aliases input 0"),
    ("MUTATES_INPUT", "swiglu", False, "correctness", "input 0 was modified"),
    ("WRONG_STRIDES", "swiglu", False, "correctness", "stride"),
    ("SCRATCH_BUFFER", "swiglu", False, "correctness", "outside the outputs"),
    ("OVERSIZE_ALLOC", "swiglu", False, "correctness", "exceed"),
    ("FLOAT32_OUTPUT", "swiglu", False, "correctness", "dtype"),
    ("TORCH_EMPTY", "swiglu", True, "correctness", "not allocated with rsi.kernel.empty"),
    ("STALE_OUTPUT", "swiglu", True, "correctness", "not allocated with rsi.kernel.empty in this call"),
    ("TENSOR_SUBCLASS", "swiglu", True, "correctness", "not a plain tensor"),
    # workspace (K.scratch): never a result, bounded, and refilled before every call
    ("SCRATCH_AS_OUTPUT", "swiglu", False, "correctness", "scratch zone"),
    ("SCRATCH_OVERSIZE", "swiglu", False, "correctness", "scratch exceeds"),
    ("SCRATCH_CACHE", "swiglu", True, "correctness", GARBAGE),
    ("SCRATCH_MARKER_CACHE", "swiglu", True, "correctness", "case refill"),
    ("SCRATCH_SLACK_MARKER", "swiglu", True, "correctness", "case refill"),
    ("SCRATCH_ZERO_DETECT", "swiglu", True, "correctness", "case refill"),
    # crashes
    ("CRASH_EXIT", "swiglu", True, "crash", "exit code 7"),
    ("SEGFAULT", "swiglu", True, "crash", ("signal 11", "exit code 139")),  # 139: bwrap reports 128 + SIGSEGV
]


def _source(name: str) -> str:
    src = getattr(cheats, name)
    return src() if callable(src) else src


@pytest.mark.parametrize("name, op, skip_static, stage, words", RUNTIME_CHEATS, ids=[c[0] for c in RUNTIME_CHEATS])
def test_runtime_cheat_rejected(judge, runtime, name, op, skip_static, stage, words):
    if name == "JUDGE_MEMORY" and not jail.available()[0]:
        pytest.skip(f"no producer sandbox: {jail.available()[1]}")
    v = evaluate(runtime if skip_static else judge, _source(name), op)
    expect_rejected(v, stage, words)


# -------------------------------------------------------------------------------------------- static rejections
# 2. the allow-list: (cheat, reason words)
STATIC_CHEATS = [
    ("DEFAULT_ARG", "default argument"),
    ("ANNOTATION", "annotation"),
    ("DECORATOR_ARG", "decorator argument"),
    ("BUILTINS", "__builtins__"),
    ("MODULE_ALIAS", "module-level value F"),
    ("TORCH_OPS_ATEN", "K.torch"),
    ("GETATTR_COMPUTED", "getattr"),
    ("SYS_MODULES", "vars"),
    ("SHAPE_ARITHMETIC", "special-casing shapes"),
    ("SHAPE_FOLDED", "special-casing shapes"),
    ("SHAPE_LOOP", "special-casing shapes"),
    ("HOST_TORCH", "compute belongs in a @triton.jit kernel"),
    ("HEURISTICS", "decorator"),
    ("AUTOTUNE", "decorator"),
    ("SET_ALLOCATOR", "set_allocator"),
    ("DATA_PTR", "data_ptr"),
    ("MODULE_CACHE", "module-level value _CACHE"),
    ("EXEC_STRING", "exec"),
    ("TRY_FALLBACK", "try/except"),
    ("INLINE_ASM", "inline assembly"),
    ("CLASS_SUBCLASS", "class definition"),
    ("LAMBDA_GRID", "lambda"),
    ("HARNESS_FINGERPRINT", "imports sys"),
    # the full-Python cheats of the other classes, judged with the static check on
    ("PATCH_CHECK", "imports rsi.harness"),
    ("PATCH_TORCH", "imports torch"),
    ("TORCH_FUNCTION_MODE", "imports torch"),
    ("FRAME_GC_SEARCH", "imports gc"),
    ("FORGE_STDOUT", "imports json"),
    ("FORGE_ALL_FDS", "imports json"),
    ("STOLEN_NONCE_TWO_REPLIES", "imports os"),
    ("STOLEN_NONCE_FORGED_REPLY", "imports os"),
    ("EXIT_EARLY", "imports os"),
    ("SYS_EXIT", "SystemExit"),
    ("EXIT_AT_IMPORT", "imports os"),
    ("POISON", "imports os"),
    ("JUDGE_MEMORY", "imports os"),
    ("MODULE_NAME", "__name__"),
    ("FIRST_N_CALLS", "module-level value _CALLS"),
    ("ODD_CALLS", "module-level value _CALLS"),
    ("INPUT_CACHE", "module-level value _SEEN"),
    ("TORCH_EMPTY", "imports torch"),
    ("STALE_OUTPUT", "module-level value _FIRST"),
    ("TENSOR_SUBCLASS", "imports torch"),
    ("CRASH_EXIT", "imports os"),
    ("SEGFAULT", "imports ctypes"),
    ("HANG", "while"),
    ("DETECT_JUDGE_EMPTY", "storage_offset() of memory the candidate allocated"),
    ("DETECT_JUDGE_SCRATCH", "storage_offset() of memory the candidate allocated"),
    ("DETECT_JUDGE_HELPER", "storage_offset() of memory the candidate allocated"),
]


@pytest.mark.parametrize("name, words", STATIC_CHEATS, ids=[c[0] for c in STATIC_CHEATS])
def test_static_cheat_rejected(judge, name, words):
    v = evaluate(judge, _source(name))
    expect_rejected(v, "static", words)


def test_static_rejects_every_probe(judge):
    """The sandbox probes need os/ctypes/socket: the allow-list stops each before any code runs."""
    for src in (cheats.write_outside("/nonexistent", "/nonexistent"), cheats.network(9, "/nonexistent"),
                cheats.env_key("sk-x"), cheats.daemon("1")):
        expect_rejected(evaluate(judge, src), "static", "import")


# ----------------------------------------------------------------------------------------- honest controls
def test_module_name_cheat_runs_honestly(runtime):
    """Cheats whenever it is not imported under the runtime's module name: the judge imports it under that name,
    so it computes honestly there and must be accepted (the judge and the runtime load candidates alike)."""
    expect_accepted(evaluate(runtime, cheats.MODULE_NAME))


def test_scratch_used_as_workspace_is_accepted(judge):
    """K.scratch is workspace: a kernel that writes into it before writing its output is accepted (the judge does
    not count the scratch zone's bytes as out-of-bounds writes)."""
    expect_accepted(evaluate(judge, cheats.SCRATCH_HONEST))
    expect_accepted(evaluate(judge, cheats.SCRATCH_ONE_COPY))   # the whole allowance, a single-input op


def test_fixed_seed_cheat_would_pass_the_old_fixed_seeds():
    """The fixed-seed cheat is a real one: with the old judge's seeds 0..4 (and no drawn shapes) it is accepted;
    only the fresh seeds of every Judge reject it (test_runtime_cheat_rejected[fixed_seeds])."""
    with Judge(JudgeOptions(backend="interpret", seeds=(0, 1, 2, 3, 4), drawn_shapes=0)) as j:
        expect_accepted(evaluate(j, cheats.fixed_seeds()))


def test_poison_and_crash_leave_next_candidates_judged_right(judge, runtime):
    """A candidate that patches everything it can reach and drops poisoned modules wherever it can write, and one
    that segfaults, are rejected; the same judges then accept the honest K-style swiglu (the honest control) and
    still reject a wrong one."""
    expect_rejected(evaluate(runtime, cheats.POISON), "correctness", "max-abs error")
    expect_rejected(evaluate(runtime, cheats.SEGFAULT), "crash", ("signal 11", "exit code 139"))
    expect_accepted(evaluate(judge, cheats.HONEST))
    expect_rejected(evaluate(runtime, cheats.WRONG), "correctness", "max-abs error")


# ----------------------------------------------------------------------------------------- sandbox probes
def _canary_root() -> str:
    """A host directory outside /tmp (the sandbox mounts its own tmpfs there): /var/tmp, else this folder. The probes
    only ever write their canary files there (and in /dev/shm) and connect to the listeners these tests open."""
    return "/var/tmp" if os.path.isdir("/var/tmp") and os.access("/var/tmp", os.W_OK) else os.path.dirname(__file__)


@needs_sandbox
def test_no_file_written_outside_scratch(runtime):
    canary = tempfile.mkdtemp(prefix="rsi-adv-canary-", dir=_canary_root())
    shm = f"/dev/shm/rsi-adv-canary-{secrets.token_hex(6)}"
    try:
        v = evaluate(runtime, cheats.write_outside(canary, shm))
        found = sorted(os.listdir(canary)) + ([shm] if os.path.exists(shm) else [])
        assert not found, f"the candidate wrote on the host: {found}; verdict: {v['reason'][:400]}"
        # a write into the sandbox's own private /dev/shm succeeds inside and reaches nothing on the host (checked
        # above); no read-only mount may have been made writable
        expect_rejected(v, "correctness", ("PROBE-BLOCKED", "PROBE-ESCAPED"))
        assert "remounted 0 " in v["reason"] or "PROBE-BLOCKED" in v["reason"], v["reason"][:400]
    finally:
        shutil.rmtree(canary, ignore_errors=True)
        if os.path.exists(shm):
            os.remove(shm)


@needs_sandbox
def test_no_network(runtime):
    """A TCP listener on the host's loopback and a unix socket on the host's file system: the candidate reaches
    neither (it returns wrong results if it connects, and raises PROBE-BLOCKED if every attempt fails)."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    sock_dir = tempfile.mkdtemp(prefix="rsi-adv-sock-", dir=_canary_root())
    unix_path = os.path.join(sock_dir, "s")
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(unix_path)
    unix.listen(8)
    got: list[str] = []
    stop = threading.Event()

    def accept(s, name):
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = s.accept()
                got.append(name)
                c.close()
            except OSError:
                pass

    threads = [threading.Thread(target=accept, args=(s, n), daemon=True) for s, n in ((tcp, "tcp"), (unix, "unix"))]
    for t in threads:
        t.start()
    try:
        v = evaluate(runtime, cheats.network(tcp.getsockname()[1], unix_path))
        time.sleep(0.5)
        assert not got, f"the candidate connected to the host: {got}; verdict: {v['reason'][:400]}"
        expect_rejected(v, "correctness", "PROBE-BLOCKED")
    finally:
        stop.set()
        for t in threads:
            t.join(2)
        tcp.close()
        unix.close()
        shutil.rmtree(sock_dir, ignore_errors=True)


_ENV_SCRIPT = r"""
import json, sys
from rsi.contract import Candidate
from rsi.harness.judge import Judge, JudgeOptions
src = sys.stdin.read()
with Judge(JudgeOptions(backend="interpret", skip_static=True)) as j:
    v = j.evaluate(Candidate("swiglu", src, {}, origin="offline"))
print(json.dumps({"status": v["status"], "stage": v["stage"], "reason": v["reason"]}))
"""


@needs_sandbox
def test_api_key_not_visible():
    """The judge runs as the CLI would, started with API keys in its environment; the candidate looks for the key
    in its own environment and in every /proc/<pid>/environ and cmdline it can read. It must find it nowhere."""
    key = "sk-fake-" + secrets.token_hex(16)
    env = {**os.environ, "OPENAI_API_KEY": key, "ANTHROPIC_API_KEY": key}
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", _ENV_SCRIPT], input=cheats.env_key(key), capture_output=True,
                       text=True, env=env, timeout=300, check=False, cwd=repo)
    assert r.returncode == 0, r.stderr[-2000:]
    v = json.loads(r.stdout.strip().splitlines()[-1])
    expect_rejected(v, "correctness", "PROBE-BLOCKED")


def test_api_key_set_in_this_process_not_passed_on(runtime, monkeypatch):
    """The key set in the judge's own os.environ (after it started): the producer's environment filter keeps it
    out (the subprocess test above also covers keys the judge process was started with)."""
    key = "sk-fake-" + secrets.token_hex(16)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("RSI_TEST_SECRET_TOKEN", key)
    expect_rejected(evaluate(runtime, cheats.env_key(key)), "correctness", "PROBE-BLOCKED")


def _find_processes(token: str) -> list[int]:
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if token.encode() in f.read():
                        pids.append(int(pid))
            except OSError:
                pass
    return pids


@needs_sandbox
def test_no_process_outlives_its_candidate(runtime):
    """A candidate double-forks a daemon in a new session (the base of any attack on the next candidate): once its
    verdict is in, no process of it may be left on the host."""
    token = str(secrets.randbelow(10**9)).rjust(9, "1")
    v = evaluate(runtime, cheats.daemon(token))
    time.sleep(1.0)
    left = _find_processes("40." + token)
    for pid in left:  # started by this test (through the candidate): end it by its id
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    assert not left, f"processes left behind by the candidate: {left}"
    expect_rejected(v, "correctness", "max-abs error")


def test_hang_times_out():
    with Judge(JudgeOptions(backend="interpret", skip_static=True, timeout_s=20)) as j:
        v = evaluate(j, cheats.HANG)
    expect_rejected(v, "timeout", "no reply within")


@pytest.mark.xfail(strict=True, reason="known limit (README, contract): a size compared with a launch parameter's "
                                       "default passes the static shape rule")
def test_shape_special_case_behind_a_launch_default_is_static(judge):
    v = evaluate(judge, cheats.MAGIC_DEFAULT)
    expect_rejected(v, "static", "special-casing")


def test_shape_special_case_behind_a_launch_default_fails_its_trials(judge):
    """The bypass above buys no wrong result: the special path (an unwritten output at ffn=96, the interpreter's
    "tiny" shape) is caught by the trials."""
    v = evaluate(judge, cheats.MAGIC_DEFAULT)
    expect_rejected(v, "correctness", ("max-abs", "NaN", "per-element", "relative-L2", "cosine"))
