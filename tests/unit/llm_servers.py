"""Loopback HTTP servers that speak the OpenAI Chat Completions and the Anthropic Messages wire protocols.

Tests drive the real ``openai`` and ``anthropic`` client libraries against them. Each server plays a script of
actions, one per request: ``("reply", text)``, ``("status", code)`` (an error body in the protocol's format,
``Retry-After`` set for 429), ``("sleep", seconds, text)`` (answer late, to provoke a client timeout),
``("raw", body, content_type)`` (a 200 with exactly that body: truncated JSON, an HTML page from a proxy...),
``("nousage", text)`` (a reply without its ``usage`` object), ``("echo_key", text)`` (a reply whose ``{KEY}``
placeholders are replaced by the request's own key, as a misconfigured proxy may echo it). When the script runs out it answers 500.
Every request is recorded (path, headers, JSON body). Only 127.0.0.1 is bound.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class LoopbackLLM:
    def __init__(self, protocol: str, actions: list[tuple], model: str = "test-model",
                 usage: tuple[int, int] | None = None):
        assert protocol in ("openai", "anthropic")
        self.protocol, self.model, self.usage = protocol, model, usage
        self.actions = list(actions)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}" + ("/v1" if self.protocol == "openai" else "")

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def completions(self) -> list[dict[str, Any]]:
        """Requests for completions (model listings excluded)."""
        return [r for r in self.requests if r["method"] == "POST"]

    def prompt_of(self, request: dict[str, Any]) -> str:
        body = request["body"]
        if self.protocol == "anthropic":
            return body.get("system", "") + "\n" + "".join(m["content"] for m in body["messages"])
        return "".join(m["content"] for m in body["messages"])

    # ---------------------------------------------------------------------------------------------- protocol
    def _ok_body(self, body: dict, text: str) -> dict:
        prompt_chars = len(json.dumps(body.get("messages", ""))) + len(body.get("system", ""))
        n_in, n_out = self.usage or (prompt_chars // 4, max(len(text) // 4, 1))
        if self.protocol == "anthropic":
            return {"id": "msg_test", "type": "message", "role": "assistant", "model": body.get("model", self.model),
                    "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                    "usage": {"input_tokens": n_in, "output_tokens": n_out}}
        return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body.get("model", self.model),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}}

    def _error_body(self, code: int) -> dict:
        kind = {429: "rate_limit_error", 401: "authentication_error"}.get(code, "api_error")
        if self.protocol == "anthropic":
            return {"type": "error", "error": {"type": kind, "message": f"test server says {code}"}}
        return {"error": {"message": f"test server says {code}", "type": kind, "code": kind}}

    def _handler(self):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _send(self, code: int, body: dict | str, headers: dict | None = None,
                      content_type: str = "application/json") -> None:
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                try:
                    self.send_response(code)
                    self.send_header("content-type", content_type)
                    self.send_header("content-length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): that is the point of a "sleep" action

            def do_GET(self) -> None:
                with outer.lock:
                    outer.requests.append({"method": "GET", "path": self.path, "headers": dict(self.headers),
                                           "body": None})
                self._send(200, {"object": "list", "data": [{"id": outer.model, "object": "model", "created": 0,
                                                             "owned_by": "test"}]})

            def do_POST(self) -> None:
                n = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                with outer.lock:
                    outer.requests.append({"method": "POST", "path": self.path, "headers": dict(self.headers),
                                           "body": body})
                    action = outer.actions.pop(0) if outer.actions else ("status", 500)
                if action[0] == "reply":
                    self._send(200, outer._ok_body(body, action[1]))
                elif action[0] == "raw":
                    self._send(200, action[1], content_type=action[2])
                elif action[0] == "nousage":
                    ok = outer._ok_body(body, action[1])
                    ok.pop("usage")
                    self._send(200, ok)
                elif action[0] == "echo_key":
                    auth = self.headers.get("authorization", "").removeprefix("Bearer ")
                    key = self.headers.get("x-api-key") or auth
                    self._send(200, outer._ok_body(body, action[1].replace("{KEY}", key)))
                elif action[0] == "sleep":
                    time.sleep(action[1])
                    self._send(200, outer._ok_body(body, action[2]))
                else:
                    code = action[1]
                    self._send(code, outer._error_body(code), {"retry-after": "0.01"} if code == 429 else None)

        return Handler


# ------------------------------------------------------------------------------------------ replies for the tests
GOOD_KERNEL = '''"""SwiGLU: one row per program, columns tiled by BLOCK_F; silu rounded to bf16 before the product."""

import triton
import triton.language as tl

from rsi import kernel as K

TUNABLE = (("BLOCK_F", (64, 128, 256)), ("num_warps", (2, 4)))


@triton.jit
def _kernel(x_ptr, out_ptr, n_cols, stride_x, stride_out, BLOCK_F: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    mask = cols < n_cols
    g = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * stride_x + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    s = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, (s * u).to(tl.bfloat16), mask=mask)


def launch(x, BLOCK_F=128, num_warps=4):
    n_rows = x.shape[0]
    n_cols = x.shape[1] // 2
    out = K.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    grid = (n_rows, triton.cdiv(n_cols, BLOCK_F))
    _kernel[grid](x, out, n_cols, x.stride(0), out.stride(0), BLOCK_F=BLOCK_F, num_warps=num_warps)
    return out
'''
# passes the static allow-list but compiles nowhere: a block of BLOCK_F + 1 lanes is not a power of two (the
# interpreter reports it when the kernel first runs)
BROKEN_KERNEL = GOOD_KERNEL.replace("tl.arange(0, BLOCK_F)", "tl.arange(0, BLOCK_F + 1)").replace("BLOCK_F=128",
                                                                                                  "BLOCK_F=64")
# computes the op with torch on the host: the contract's static checks reject it before anything runs
CHEAT_KERNEL = '''import torch.nn.functional as F


def launch(x):
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up
'''


def reply(source: str, prose: str = "Here is the kernel.") -> str:
    return f"{prose}\n\n```python\n{source}```\n\nIt keeps the reference's rounding."
