"""The SDK against the server's OpenAPI document: every type of
sluice.models against its schema (fields both ways, required fields both
ways, types, enums), and every request the SDK builds against the
operation it calls (method, path, query parameters, body fields). This is
the check that fails when the server's API and the SDK drift apart."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import typing
from typing import Any

import httpx
import pytest

import sluice
from sluice import _core, models
from sluice.config import Login, ssl_context


@pytest.fixture(scope="module")
def openapi(service) -> dict[str, Any]:
    r = httpx.get(service.url + "/openapi.json", verify=ssl_context(service.ca))
    r.raise_for_status()
    return r.json()


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType")):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) < len(typing.get_args(tp)):
            return (args[0] if len(args) == 1 else typing.Union[tuple(args)]), True
    return tp, False


def _types(prop: dict) -> set[str]:
    t = prop.get("type")
    return set(t) if isinstance(t, list) else {t} if t else set()


def type_problems(where: str, hint: Any, prop: dict, request: bool) -> list[str]:
    """How hint differs from the schema prop (empty: they agree)."""
    hint, optional = _strip_optional(hint)
    types = _types(prop)
    if optional and "null" not in types and not request and where.endswith("!"):
        return [f"{where}: Optional in the SDK, but required and not nullable in the schema"]
    types.discard("null")
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        if getattr(hint, "__schema__", None) != name:
            return [f"{where}: schema {name}, SDK {hint!r}"]
        return []
    if not types:
        return [] if hint is Any else [f"{where}: any JSON in the schema, SDK {hint!r}"]
    (t,) = types
    origin = typing.get_origin(hint)
    if t == "array":
        if origin is not list:
            return [f"{where}: array in the schema, SDK {hint!r}"]
        return type_problems(where + "[]", typing.get_args(hint)[0], prop.get("items", {}), request)
    if t == "string":
        if prop.get("format") == "date-time":
            want = str if request else dt.datetime
            return [] if hint is want else [f"{where}: date-time in the schema, SDK {hint!r}"]
        enum = prop.get("enum")
        if origin is typing.Literal:
            got = set(typing.get_args(hint))
            if enum is None:
                return [f"{where}: a free string in the schema, SDK Literal{sorted(got)}"]
            if got != set(enum):
                return [f"{where}: enum {sorted(enum)} in the schema, SDK Literal{sorted(got)}"]
            return []
        if enum is not None:
            return [f"{where}: enum {sorted(enum)} in the schema, SDK {hint!r} (want a Literal)"]
        return [] if hint is str else [f"{where}: string in the schema, SDK {hint!r}"]
    want = {"integer": int, "number": float, "boolean": bool}.get(t)
    if want is None:
        return [f"{where}: schema type {t} unknown to this check"]
    return [] if hint is want else [f"{where}: {t} in the schema, SDK {hint!r}"]


def model_problems(name: str, cls: type, schemas: dict) -> list[str]:
    schema = schemas.get(name)
    if schema is None:
        return [f"{name}: no such schema in /openapi.json (SDK type {cls.__name__})"]
    props: dict = schema.get("properties", {})
    required = set(schema.get("required") or [])
    hints = models.hints(cls)
    if dataclasses.is_dataclass(cls):
        request = False
        fields = {models.json_name(f): f for f in models.api_fields(cls)}
        sdk_types = {k: hints[f.name] for k, f in fields.items()}
        sdk_required = {k for k, f in fields.items()
                        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    else:  # a TypedDict: a request
        request = True
        sdk_types = dict(hints)
        sdk_required = set(cls.__required_keys__)
    out = []
    for k in sorted(set(props) - set(sdk_types)):
        out.append(f"{name}.{k}: in the schema, not in the SDK's {cls.__name__}")
    for k in sorted(set(sdk_types) - set(props)):
        out.append(f"{name}.{k}: in the SDK's {cls.__name__}, not in the schema")
    for k in sorted(required - sdk_required):
        out.append(f"{name}.{k}: required in the schema, optional in the SDK")
    for k in sorted(sdk_required - required):
        out.append(f"{name}.{k}: required in the SDK, optional in the schema")
    for k in sorted(set(props) & set(sdk_types)):
        out += type_problems(f"{name}.{k}" + ("!" if k in required else ""), sdk_types[k], props[k], request)
    return out


def test_models_match_the_schemas(openapi):
    schemas = openapi["components"]["schemas"]
    problems = []
    for name, cls in models.SCHEMAS.items():
        problems += model_problems(name, cls, schemas)
    assert not problems, "the SDK's types and /openapi.json disagree:\n" + "\n".join(problems)


def test_every_answer_and_request_schema_of_the_sdks_calls_has_a_type(openapi):
    """The schemas of what the SDK sends and reads are all mirrored (a new
    schema the SDK's calls return must get a type)."""
    used = {"JobOut", "SubmitOut", "FileOut", "EndpointOut", "EstimateOut", "EstimateSample", "Event",
            "UserOut", "DataTokenOut", "JobIn", "FileIn", "ParamsIn", "AdaptiveSpec", "EstimateIn", "DataTokenIn"}
    assert used <= set(models.SCHEMAS), sorted(used - set(models.SCHEMAS))
    assert used <= set(openapi["components"]["schemas"])


def test_the_problem_document_has_what_errors_read(openapi):
    props = openapi["components"]["schemas"]["ErrorModel"]["properties"]
    for k in ("status", "title", "detail", "errors", "type", "instance"):
        assert k in props, k
    assert {"message", "location"} <= set(openapi["components"]["schemas"]["ErrorDetail"]["properties"])


def _operation(openapi: dict, method: str, path: str) -> dict | None:
    for template, ops in openapi["paths"].items():
        rx = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
        if re.match(rx, path) and method.lower() in ops:
            return ops[method.lower()]
    return None


def test_every_request_the_sdk_builds_is_an_operation(openapi):
    core = _core.Core(Login("https://sluice.example:8080", "t"), 60)
    job = sluice.TransferData(label="x", batch=True, checksum="sha256", overwrite=True, priority=2, retry=1,
                              submission_id="s", streams=2, optimization=True, preserve_mtime=True)
    job.add("sluice://a1/f", "sluice://a2/f", size=1, checksum="adler32:00000001", metadata={"k": 1})
    job.add_dir("sluice://a1/d", "sluice://a2/d")
    calls = [
        core.whoami(), core.submit(job), core.status(7), core.jobs("done", 10, 5), core.files(7, 3, 10, "failed"),
        core.cancel(7), core.endpoints(), core.data_token("sluice://a1/f", True),
        core.estimate("sluice://a1/f", "sluice://a2/", 10, sample_size=65536, max_streams=4, growth=2,
                      use_history=True),
    ]
    reqs = [c.request for c in calls] + [core.events_request(7, 45)]
    schemas = openapi["components"]["schemas"]
    for r in reqs:
        op = _operation(openapi, r.method, r.url.path)
        assert op is not None, f"{r.method} {r.url.path}: no such operation in /openapi.json"
        names = {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
        assert set(r.url.params.keys()) <= names, (r.method, r.url.path, set(r.url.params.keys()) - names)
        if r.content:
            ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
            body = __import__("json").loads(r.content)
            assert set(body) <= set(schemas[ref]["properties"]), (ref, set(body) - set(schemas[ref]["properties"]))
            if ref == "JobIn":
                fprops = set(schemas["FileIn"]["properties"])
                for f in body["files"]:
                    assert set(f) <= fprops, set(f) - fprops


def test_the_check_sees_a_difference(openapi):
    """The comparison is not vacuous: a schema with a field more, one
    required field less, or another type is reported."""
    schemas = __import__("copy").deepcopy(openapi["components"]["schemas"])
    schemas["JobOut"]["properties"]["new_field"] = {"type": "string"}
    schemas["JobOut"]["required"].remove("owner")
    schemas["FileOut"]["properties"]["size"] = {"type": "string"}
    schemas["JobOut"]["properties"]["state"]["enum"].append("paused")
    p = model_problems("JobOut", models.Job, schemas) + model_problems("FileOut", models.File, schemas)
    text = "\n".join(p)
    assert "JobOut.new_field: in the schema, not in the SDK" in text
    assert "JobOut.owner: required in the SDK, optional in the schema" in text
    assert "FileOut.size!: string in the schema" in text
    assert "JobOut.state!: enum" in text
