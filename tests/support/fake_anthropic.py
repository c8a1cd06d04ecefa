#!/usr/bin/env python3
"""A scripted stand-in for the Anthropic Messages API, on loopback only.

Serves `POST /v1/messages` (any query, e.g. `?beta=true`) in the streaming
SSE format Claude Code reads (message_start, content_block_start,
content_block_delta with text_delta / input_json_delta, content_block_stop,
message_delta with stop_reason, message_stop), and a plain JSON message when
the request does not ask for a stream. Every request (method, path, body) is
appended to the record file as one JSON line before it is answered.

The script (a JSON file) is a list of rules, tried in order against the last
user message of a request:

  {"after_tool_result": "toolu_w1", "tool_use": {"id": ..., "name": ..., "input": {...}}}
  {"user_text_contains": "PHASE1", "text": "done"}
  {"user_text_contains": "PHASE3", "hang": true}

`after_tool_result` matches when that message carries a tool_result for the
id; `user_text_contains` when one of its text blocks (or its string content)
contains the text. The reply is a tool_use (stop_reason `tool_use`), a text
(stop_reason `end_turn`), or `hang`: message_start, then nothing until the
client goes away (at most `--hang-seconds`). A tool_use may name any tool
Claude Code offers, an MCP server's included (`mcp__<server>__<tool>`); the
tool_result Claude Code sends back is in the record, in the next request. A rule may also hold its reply
until a file exists (`"wait_for_file": PATH`, at most `--hang-seconds`): a
test keeps the session open that way while it checks the service. No rule
matches: the text `ok`.

Usage: fake_anthropic.py --script FILE --record FILE
Prints `port <n>` on standard output once listening on 127.0.0.1, then
serves until killed.
"""

import argparse
import gzip
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()


def last_user_message(body):
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            return message
    return None


def blocks_of(message):
    content = message.get("content") if message else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def choose(script, body):
    blocks = blocks_of(last_user_message(body))
    results = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
    texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
    for rule in script:
        if "after_tool_result" in rule and rule["after_tool_result"] in results:
            return rule
        if "user_text_contains" in rule and not results and any(
            rule["user_text_contains"] in text for text in texts
        ):
            return rule
    return {"text": "ok"}


def sse(event, data):
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-anthropic/1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding") == "gzip":
            raw = gzip.decompress(raw)
        return raw

    def record(self, raw):
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        line = json.dumps({"method": self.command, "path": self.path, "body": body})
        with LOCK:
            with open(self.server.record_path, "a", encoding="utf-8") as out:
                out.write(line + "\n")
        return body

    def send_json(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def do_GET(self):
        self.record(b"")
        self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "fake"}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self.record(self.read_body())
        if not self.path.startswith("/v1/messages") or not isinstance(body, dict):
            self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "fake"}})
            return
        if self.path.startswith("/v1/messages/count_tokens"):
            self.send_json(200, {"input_tokens": 10})
            return
        with LOCK:
            self.server.counter += 1
            n = self.server.counter
        rule = choose(self.server.script, body)
        if "wait_for_file" in rule:
            deadline = time.monotonic() + self.server.hang_seconds
            while not os.path.exists(rule["wait_for_file"]) and time.monotonic() < deadline:
                time.sleep(0.1)
        model = body.get("model", "claude-fake")
        message = {
            "id": f"msg_fake_{n}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        if "tool_use" in rule:
            block = {"type": "tool_use", **rule["tool_use"]}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": rule.get("text", "ok")}
            stop = "end_turn"
        if not body.get("stream"):
            message["content"] = [block]
            message["stop_reason"] = stop
            self.send_json(200, message)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        out = [sse("message_start", {"type": "message_start", "message": message})]
        if rule.get("hang"):
            self.wfile.write(b"".join(out))
            self.wfile.flush()
            deadline = time.monotonic() + self.server.hang_seconds
            try:
                while time.monotonic() < deadline:
                    time.sleep(0.5)
                    self.wfile.write(b"event: ping\ndata: {\"type\": \"ping\"}\n\n")
                    self.wfile.flush()
            except OSError:
                pass
            return
        if block["type"] == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        out.append(sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}))
        out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
        out.append(
            sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            )
        )
        out.append(sse("message_stop", {"type": "message_stop"}))
        try:
            self.wfile.write(b"".join(out))
            self.wfile.flush()
        except OSError:
            pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--hang-seconds", type=float, default=120.0)
    args = parser.parse_args()
    with open(args.script, encoding="utf-8") as f:
        script = json.load(f)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.script = script
    server.record_path = args.record
    server.hang_seconds = args.hang_seconds
    server.counter = 0
    print(f"port {server.server_address[1]}", flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
