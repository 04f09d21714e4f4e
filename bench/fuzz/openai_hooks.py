"""Schemathesis hooks for bench/fuzz-openapi.sh.

Keeps generated requests cheap (max_tokens and n small), checks that every 4xx/5xx body is an
OpenAI error ({"error": {"message", "type", "param", "code"}}), and counts every response into the
JSON file named by FUZZ_STATS (requests, 5xx, error bodies not in the OpenAI shape, and a sample of each).
"""
import atexit
import json
import os

import schemathesis

STATS = {"requests": 0, "status": {}, "server_errors": [], "not_openai_shape": []}
SAMPLES = 100
# Generation is the slow part of a request: a handful of tokens shows the same code paths.
TOKEN_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def _write_stats():
    path = os.environ.get("FUZZ_STATS")
    if path:
        with open(path, "w") as out:
            json.dump(STATS, out, indent=1)


atexit.register(_write_stats)


def openai_shape_problem(response):
    """None when the body is an OpenAI error, else what is wrong with it."""
    try:
        body = json.loads(response.content or b"")
    except ValueError:
        return "not JSON"
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return "no error object"
    for field in ("message", "type", "param", "code"):
        if field not in error:
            return f"error.{field} missing"
    if not isinstance(error["message"], str) or not isinstance(error["type"], str):
        return "message or type not a string"
    for field in ("param", "code"):
        if error[field] is not None and not isinstance(error[field], str):
            return f"error.{field} neither a string nor null"
    return None


@schemathesis.hook
def before_call(context, case, kwargs):
    if isinstance(case.body, dict):
        for field in TOKEN_FIELDS:
            value = case.body.get(field)
            if isinstance(value, int) and not isinstance(value, bool) and value > 4:
                case.body[field] = 2
        n = case.body.get("n")
        if isinstance(n, int) and not isinstance(n, bool) and n > 2:
            case.body["n"] = 2


_SEEN = set()


def _sample(kind, case, response, detail):
    key = (kind, case.method, case.operation.path, response.status_code, detail)
    if key in _SEEN:
        return
    _SEEN.add(key)
    if len(STATS[kind]) < SAMPLES:
        body = response.content[:300].decode("utf8", "replace") if response.content else ""
        sent = json.dumps(case.body, default=str)[:600] if case.body is not None else None
        STATS[kind].append({"method": case.method, "path": case.formatted_path, "status": response.status_code, "detail": detail, "body": body, "sent": sent})


@schemathesis.hook
def after_call(context, case, response):
    STATS["requests"] += 1
    status = str(response.status_code)
    STATS["status"][status] = STATS["status"].get(status, 0) + 1
    if response.status_code >= 500:
        _sample("server_errors", case, response, None)
    if response.status_code >= 400:
        problem = openai_shape_problem(response)
        if problem:
            _sample("not_openai_shape", case, response, problem)
            STATS.setdefault("not_openai_shape_count", 0)
            STATS["not_openai_shape_count"] += 1
    STATS.setdefault("server_error_count", 0)
    if response.status_code >= 500:
        STATS["server_error_count"] += 1


@schemathesis.check
def openai_error_shape(ctx, response, case):
    if response.status_code >= 400:
        problem = openai_shape_problem(response)
        if problem:
            raise AssertionError(f"The error body is not in the OpenAI shape: {problem}")
    return None
