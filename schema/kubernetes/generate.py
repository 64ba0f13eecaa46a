#!/usr/bin/env python3
"""Generate graft's compact table of the Kubernetes built-in kinds' schemas.

The table is what MutatingAdmissionPolicy-style merging (structured-merge-diff,
"SMD") and graft's own type checking need from the Kubernetes OpenAPI v3
spec: for every built-in kind, the named struct types reachable from it, each
field's type, and the list/map/struct merge semantics (x-kubernetes-list-type,
x-kubernetes-list-map-keys, x-kubernetes-map-type), interpreted the way the
apiserver interprets them when it builds SMD schemas for MAP
(k8s.io/kube-openapi/pkg/schemaconv; README.md beside this file).

graft's checked-in table, schema/kubernetes/v1.36.json, is exactly what this
command writes when run from graft's repository root, with KUBE a checkout (or an
extracted source tree) of Kubernetes v1.36.2:

    python3 schema/kubernetes/generate.py \\
        --spec-dir "$KUBE/api/openapi-spec/v3" \\
        --source "Kubernetes v1.36.2, api/openapi-spec/v3" \\
        --out schema/kubernetes/v1.36.json

Only the Python 3.11 standard library is used.  The output is deterministic:
the same spec files always give byte-identical output (keys are sorted and
nothing depends on file-system or dict iteration order).

Output format (format 1) -- documented in README.md beside this file:

    {
      "format": 1,
      "source": "...",
      "kinds": {"v1/Pod": "core.v1.Pod", "apps/v1/Deployment": "apps.v1.Deployment", ...},
      "types": {
        "core.v1.Pod": {
          "fields": {"spec": "core.v1.PodSpec", ...},
          "mapType": "atomic",        # only when the struct is atomic
          "required": [...],          # only when non-empty
          "preserveUnknown": true,    # unknown fields accepted, typed "any"
          "embedded": true            # x-kubernetes-embedded-resource
        }, ...
      }
    }

TYPEEXPR (the value of a field) is one of
  * a scalar name: "string", "integer", "int32", "number", "boolean",
    "byte" (string, format byte), "date-time" (string, format date-time),
    "int-or-string", "quantity",
    "any"        -- any JSON value; objects merge key by key (values "any"),
                    lists are atomic (SMD __untyped_deduced_),
    "any-atomic" -- any JSON value, replaced as a whole (SMD
                    __untyped_atomic_; runtime.RawExtension);
  * a TYPE_NAME (key of "types");
  * {"ref": TYPE_NAME, "mapType": "granular"|"atomic"} -- a reference whose
    field overrides the referred struct's map type;
  * {"list": TYPEEXPR, "listType": "atomic"|"set"|"map",
     "keys": [...], "keyDefaults": {...}}   (keys/keyDefaults for "map" only;
                                             keyDefaults only when non-empty);
  * {"map": TYPEEXPR, "mapType": "granular"|"atomic"}.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

FORMAT = 1
DEFAULT_SOURCE = "Kubernetes v1.36.2, api/openapi-spec/v3"

# Type-name shortening.  Order matters: the first matching prefix wins.
# The generator checks that shortening is injective over every schema name in
# the spec and fails otherwise.
PREFIXES = [
    ("io.k8s.api.", ""),
    ("io.k8s.apimachinery.pkg.apis.", ""),
    ("io.k8s.apimachinery.pkg.", ""),
    ("io.k8s.apiextensions-apiserver.pkg.apis.", ""),
    ("io.k8s.kube-aggregator.pkg.apis.", ""),
]

# Named types that are not structs and are replaced by a scalar TYPEEXPR
# wherever they are referenced.  Quantity and RawExtension are hard-coded by
# name in kube-openapi schemaconv (openapi.go:54-59) exactly like this.
SPECIAL_NAMED = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "quantity",
    "io.k8s.apimachinery.pkg.runtime.RawExtension": "any-atomic",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "int-or-string",
}

REF_PREFIX = "#/components/schemas/"


class SpecError(Exception):
    pass


def short_name(name: str) -> str:
    for long, short in PREFIXES:
        if name.startswith(long):
            return short + name[len(long):]
    return name


def load_schemas(spec_dir: Path) -> dict[str, dict]:
    """Union of components.schemas over every *.json in spec_dir.

    The same definition appears in many per-group-version documents.  Copies
    must be identical except for x-kubernetes-group-version-kind (DeleteOptions
    and WatchEvent list a different group-version in each document); those
    lists are unioned.
    """
    files = sorted(spec_dir.glob("*.json"))
    if not files:
        raise SpecError(f"no *.json files in {spec_dir}")
    schemas: dict[str, dict] = {}
    for f in files:
        with f.open(encoding="utf-8") as fh:
            doc = json.load(fh)
        for name, sch in sorted(doc.get("components", {}).get("schemas", {}).items()):
            if name not in schemas:
                schemas[name] = json.loads(json.dumps(sch))  # private copy
                continue
            old = dict(schemas[name])
            new = dict(sch)
            og = old.pop("x-kubernetes-group-version-kind", [])
            ng = new.pop("x-kubernetes-group-version-kind", [])
            if old != new:
                raise SpecError(f"{name}: conflicting definitions (second one in {f.name})")
            merged = list(og)
            for g in ng:
                if g not in merged:
                    merged.append(g)
            if merged:
                schemas[name]["x-kubernetes-group-version-kind"] = merged
    return schemas


class Converter:
    def __init__(self, schemas: dict[str, dict]):
        self.schemas = schemas
        self.types: dict[str, dict] = {}  # short name -> type entry
        self.pending: list[str] = []  # long names still to convert
        self.seen: set[str] = set()
        self.inlining: set[str] = set()  # named non-struct types being inlined
        self.key_fields: dict[str, set[str]] = {}

        shorts: dict[str, str] = {}
        for name in schemas:
            s = short_name(name)
            if s in shorts and shorts[s] != name:
                raise SpecError(f"type name shortening collides: {shorts[s]} and {name} -> {s}")
            shorts[s] = name

    # ---- classification -------------------------------------------------

    @staticmethod
    def _type(s: dict) -> str:
        t = s.get("type", "")
        if isinstance(t, list):  # OpenAPI v3 in k8s uses a single string
            if len(t) != 1:
                raise SpecError(f"multi-valued type {t!r}")
            t = t[0]
        return t

    def is_struct(self, s: dict) -> bool:
        """A named schema that becomes an entry in "types" (an SMD map with
        fields, or a free-form object)."""
        return self._type(s) == "object" and "additionalProperties" not in s

    @staticmethod
    def ref_of(s: dict) -> str | None:
        ref = s.get("$ref")
        if ref is None and len(s.get("allOf", [])) == 1 and "$ref" in s["allOf"][0]:
            # schemaconv openapi.go:130-133: $ref inside a single-element allOf
            ref = s["allOf"][0]["$ref"]
        if ref is None:
            if "allOf" in s:
                raise SpecError("allOf other than a single $ref is not supported")
            return None
        if not ref.startswith(REF_PREFIX):
            raise SpecError(f"unsupported $ref {ref!r}")
        return ref[len(REF_PREFIX):]

    # ---- conversion ------------------------------------------------------

    def named(self, name: str, where: str):
        if name in SPECIAL_NAMED:
            return SPECIAL_NAMED[name]
        if name not in self.schemas:
            raise SpecError(f"{where}: dangling reference to {name}")
        s = self.schemas[name]
        if self.is_struct(s):
            if name not in self.seen:
                self.seen.add(name)
                self.pending.append(name)
            return short_name(name)
        # Not a struct: a named scalar/list/map/any -- inline its expression.
        if name in self.inlining:
            raise SpecError(f"{where}: recursive non-struct type {name}")
        self.inlining.add(name)
        try:
            return self.expr(s, f"{name}")
        finally:
            self.inlining.discard(name)

    def expr(self, s: dict, where: str):
        """TYPEEXPR for an inline schema (a property, items, additionalProperties)."""
        ref = self.ref_of(s)
        if ref is not None:
            target = self.named(ref, where)
            mt = s.get("x-kubernetes-map-type")
            if mt is not None:
                # schemaconv openapi.go:141-150: field-level override of the
                # referred type's element relationship.
                if mt not in ("atomic", "granular"):
                    raise SpecError(f"{where}: unknown x-kubernetes-map-type {mt!r}")
                if not isinstance(target, str) or ref not in self.schemas or not self.is_struct(self.schemas[ref]):
                    raise SpecError(f"{where}: map-type override on a non-struct reference")
                return {"ref": target, "mapType": mt}
            return target

        t = self._type(s)
        fmt = s.get("format", "")
        if t == "":
            # schemaconv openapi.go:98-107: no type = any (untyped scalar,
            # atomic list, granular map of deduced).  IntOrString is kept
            # distinct for type checking (SMD itself treats it like this).
            if fmt == "int-or-string":
                return "int-or-string"
            if s.get("properties"):
                raise SpecError(f"{where}: untyped schema with properties")
            return "any"
        if t == "string":
            if fmt == "":
                return "string"
            if fmt in ("byte", "date-time", "int-or-string"):
                return fmt
            raise SpecError(f"{where}: unsupported string format {fmt!r}")
        if t == "integer":
            return "int32" if fmt == "int32" else "integer"
        if t == "number":
            return "number"
        if t == "boolean":
            return "boolean"
        if t == "array":
            return self.list_expr(s, where)
        if t == "object":
            if s.get("properties"):
                raise SpecError(f"{where}: inline object with properties (anonymous struct) is not supported")
            return self.map_expr(s, where)
        raise SpecError(f"{where}: unrecognized type {t!r}")

    def list_expr(self, s: dict, where: str):
        items = s.get("items")
        if items is None:
            elem = "any-atomic"  # schemaconv openapi.go:248-251 (__untyped_atomic_)
        elif not isinstance(items, dict):
            raise SpecError(f"{where}: items must be a single schema")
        else:
            elem = self.expr(items, where + "[]")
        out = {"list": elem}
        lt = s.get("x-kubernetes-list-type")
        keys: list[str] = []
        if lt is not None:
            # smd.go:269-291
            if lt not in ("atomic", "set", "map"):
                raise SpecError(f"{where}: unknown x-kubernetes-list-type {lt!r}")
            if lt == "map":
                keys = s.get("x-kubernetes-list-map-keys")
                if not keys:
                    raise SpecError(f"{where}: listType map without x-kubernetes-list-map-keys")
                keys = [k for k in keys if isinstance(k, str)]
        else:
            # smd.go:292-315: fall back to the strategic-merge-patch
            # extensions, then to atomic.  (Never taken in v1.36.2: every
            # list carrying a patch strategy also has x-kubernetes-list-type.)
            ps = s.get("x-kubernetes-patch-strategy")
            if ps in ("merge", "merge,retainKeys"):
                mk = s.get("x-kubernetes-patch-merge-key")
                if mk is not None:
                    lt, keys = "map", [mk]
                else:
                    lt = "set"
            elif ps in (None, "retainKeys"):
                lt = "atomic"
            else:
                raise SpecError(f"{where}: unknown x-kubernetes-patch-strategy {ps!r}")
        out["listType"] = lt
        if lt == "map":
            out["keys"] = list(keys)
            ref = self.ref_of(items) if isinstance(items, dict) else None
            if ref is None or ref not in self.schemas or not self.is_struct(self.schemas[ref]):
                raise SpecError(f"{where}: listType map over a non-struct element")
            props = self.schemas[ref].get("properties", {})
            defaults = {}
            for k in keys:
                if k not in props:
                    raise SpecError(f"{where}: list map key {k!r} is not a field of {ref}")
                d = props[k].get("default")
                if d is not None:  # typed/helpers.go:215-218 ignores a nil default
                    defaults[k] = d
            if defaults:
                out["keyDefaults"] = defaults
        return out

    def map_expr(self, s: dict, where: str):
        ap = s.get("additionalProperties")
        if ap is None or ap is True:
            elem = "any"  # free-form object: schemaconv openapi.go:184-205
        elif ap is False:
            raise SpecError(f"{where}: object without properties and additionalProperties: false")
        elif isinstance(ap, dict):
            elem = self.expr(ap, where + "{}")
        else:
            raise SpecError(f"{where}: bad additionalProperties {ap!r}")
        mt = s.get("x-kubernetes-map-type", "granular")
        if mt not in ("atomic", "granular"):
            raise SpecError(f"{where}: unknown x-kubernetes-map-type {mt!r}")
        return {"map": elem, "mapType": mt}

    def struct(self, name: str) -> dict:
        s = self.schemas[name]
        entry: dict = {}
        fields = {}
        for fname, fs in sorted(s.get("properties", {}).items()):
            fields[fname] = self.expr(fs, f"{name}.{fname}")
        entry["fields"] = fields
        mt = s.get("x-kubernetes-map-type")
        if mt is not None and mt not in ("atomic", "granular"):
            raise SpecError(f"{name}: unknown x-kubernetes-map-type {mt!r}")
        if mt == "atomic":
            entry["mapType"] = "atomic"
        req = s.get("required") or []
        if req:
            entry["required"] = sorted(req)
        # schemaconv openapi.go:184-195: with no additionalProperties, unknown
        # fields are allowed (typed as deduced "any") iff the schema preserves
        # unknown fields or declares no properties at all.
        if s.get("x-kubernetes-preserve-unknown-fields") is True or not s.get("properties"):
            entry["preserveUnknown"] = True
        if s.get("x-kubernetes-embedded-resource") is True:
            entry["embedded"] = True
        return entry

    def run(self) -> tuple[dict, dict]:
        kinds: dict[str, str] = {}
        for name in sorted(self.schemas):
            s = self.schemas[name]
            for gvk in s.get("x-kubernetes-group-version-kind", []):
                g, v, k = gvk.get("group"), gvk.get("version"), gvk.get("kind")
                if not isinstance(g, str) or not isinstance(v, str) or not k:
                    continue
                items = s.get("properties", {}).get("items")
                if k.endswith("List") and items is not None and self._type(items) == "array":
                    continue  # list kinds are excluded
                key = f"{g}/{v}/{k}" if g else f"{v}/{k}"
                if key in kinds:
                    raise SpecError(f"GVK {key} declared by two types")
                if not self.is_struct(s):
                    raise SpecError(f"kind {key} is not a struct type")
                kinds[key] = self.named(name, key)
        while self.pending:
            name = self.pending.pop()
            self.types[short_name(name)] = self.struct(name)
        return kinds, self.types


def dump(table: dict) -> str:
    """JSON with one kind / one type per line: small, and diffs stay readable."""
    def c(v):
        return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    lines = ["{"]
    top = sorted(table)
    for i, key in enumerate(top):
        last = i == len(top) - 1
        val = table[key]
        if isinstance(val, dict) and key in ("kinds", "types"):
            lines.append(f"{c(key)}:{{")
            inner = sorted(val)
            for j, k in enumerate(inner):
                lines.append(f"{c(k)}:{c(val[k])}" + ("" if j == len(inner) - 1 else ","))
            lines.append("}" + ("" if last else ","))
        else:
            lines.append(f"{c(key)}:{c(val)}" + ("" if last else ","))
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec-dir", required=True, type=Path,
                    help="directory holding the OpenAPI v3 *.json files (api/openapi-spec/v3)")
    ap.add_argument("--out", required=True, type=Path, help="output file (schema/kubernetes/v1.36.json)")
    ap.add_argument("--source", default=DEFAULT_SOURCE,
                    help=f'value of the "source" field (default: "{DEFAULT_SOURCE}")')
    args = ap.parse_args(argv)
    try:
        schemas = load_schemas(args.spec_dir)
        kinds, types = Converter(schemas).run()
    except SpecError as e:
        print(f"generate.py: {e}", file=sys.stderr)
        return 1
    table = {
        "format": FORMAT,
        "source": args.source,
        "kinds": kinds,
        "types": types,
    }
    text = dump(table)
    json.loads(text)  # self-check: valid JSON
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}: {len(kinds)} kinds, {len(types)} types, {len(text.encode())} bytes",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
