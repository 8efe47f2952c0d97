#!/usr/bin/env python3
"""Regenerate kubernetes.proto and patch-metadata.txt, next to this script.

kubernetes.proto: the protobuf schema sim decodes request bodies with. Reads Kubernetes'
generated.proto files (the message structure and field numbers) and the Go types next to them
(which scalar fields Go's JSON encoding omits when zero: non-pointer fields tagged
`omitempty`), and writes one comment-free file with a `// omitempty` note on those fields and a
`// list` note on messages that stand for a Go slice type (`Verbs`, `ExtraValue`).

patch-metadata.txt: the strategic-merge-patch metadata of the Go types (`patchStrategy`,
`patchMergeKey` tags), one `definition field strategy [mergeKey]` line each, which sim adds to
its OpenAPI schemas as `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key` (kubectl
computes apply patches from them).

Usage: generate.py API APIMACHINERY APIEXTENSIONS
where each argument is a checkout of k8s.io/api, k8s.io/apimachinery and
k8s.io/apiextensions-apiserver at the same release (the committed files: v0.33.9).
"""

import os
import re
import sys

API = [
    "core/v1", "apps/v1", "batch/v1", "policy/v1", "rbac/v1", "scheduling/v1", "storage/v1",
    "discovery/v1", "networking/v1", "authorization/v1", "authentication/v1", "autoscaling/v1",
    "autoscaling/v2", "coordination/v1", "events/v1",
]
APIMACHINERY = [
    "pkg/apis/meta/v1", "pkg/runtime", "pkg/runtime/schema", "pkg/util/intstr",
    "pkg/api/resource",
]
APIEXTENSIONS = ["pkg/apis/apiextensions/v1"]

SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float"}
FIELD = re.compile(r"^\s*(optional|repeated)\s+(\S+)\s+(\w+)\s*=\s*(\d+);")
MAP = re.compile(r"^\s*map<\s*(\S+)\s*,\s*(\S+)\s*>\s+(\w+)\s*=\s*(\d+);")


PATCH = []


def go_fields(directory, definition_prefix):
    """{(struct, proto name): omits zero} from the Go files of a package; patch metadata is
    appended to PATCH."""
    out = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".go") or name.endswith("_test.go") or name.startswith(("zz_", "generated")):
            continue
        struct = None
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            for line in f:
                m = re.match(r"^type (\w+) struct \{", line)
                if m:
                    struct = m.group(1)
                    continue
                if line.startswith("}"):
                    struct = None
                    continue
                if struct is None or "protobuf:\"" not in line or "`" not in line:
                    continue
                decl, tags = line.split("`", 1)
                tokens = decl.split()
                if not tokens:
                    continue
                go_type = tokens[-1]
                proto = re.search(r'protobuf:"[^"]*name=(\w+)', tags)
                js = re.search(r'json:"([^"]*)"', tags)
                if not proto:
                    continue
                omitempty = bool(js) and "omitempty" in js.group(1).split(",")[1:]
                out[(struct, proto.group(1))] = omitempty and not go_type.startswith("*")
                strategy = re.search(r'patchStrategy:"([^"]*)"', tags)
                key = re.search(r'patchMergeKey:"([^"]*)"', tags)
                if strategy and js:
                    json_name = js.group(1).split(",")[0]
                    line = f"{definition_prefix}.{struct} {json_name} {strategy.group(1)}"
                    PATCH.append(line + (f" {key.group(1)}" if key else ""))
    return out


def convert(directory, definition_prefix, out):
    fields = go_fields(directory, definition_prefix)
    with open(os.path.join(directory, "generated.proto"), encoding="utf-8") as f:
        text = f.read()
    if text.startswith("/*"):
        text = text[text.index("*/") + 2 :]
    lines = text.splitlines()
    message = None
    nullable = False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("// +protobuf.nullable=true"):
            nullable = True
            continue
        if not stripped or stripped.startswith("//") or stripped.startswith(("syntax ", "import ", "option ")):
            continue
        if stripped.startswith("package "):
            out.append("")
            out.append(stripped)
            continue
        m = re.match(r"^message (\w+) \{", stripped)
        if m:
            message = m.group(1)
            out.append(f"message {message} {{" + (" // list" if nullable else ""))
            nullable = False
            continue
        if stripped == "}":
            out.append("}")
            message = None
            continue
        fm = FIELD.match(stripped)
        if fm:
            label, type_, name, number = fm.groups()
            note = ""
            if label == "optional" and type_ in SCALARS and fields.get((message, name), False):
                note = " // omitempty"
            out.append(f"  {label} {type_} {name} = {number};{note}")
            continue
        mm = MAP.match(stripped)
        if mm:
            out.append("  " + stripped)
            continue
        raise SystemExit(f"{directory}: unexpected line: {line!r}")


def main():
    api, apimachinery, apiextensions = sys.argv[1:4]
    header = [
        "// Generated by generate.py from k8s.io/api, k8s.io/apimachinery and",
        "// k8s.io/apiextensions-apiserver v0.33.9 (Kubernetes v1.33). Do not edit.",
    ]
    out = list(header)
    for d in APIMACHINERY:
        prefix = "io.k8s.apimachinery." + d.replace("/", ".")
        convert(os.path.join(apimachinery, d), prefix, out)
    for d in API:
        convert(os.path.join(api, d), "io.k8s.api." + d.replace("/", "."), out)
    for d in APIEXTENSIONS:
        prefix = "io.k8s.apiextensions-apiserver." + d.replace("/", ".")
        convert(os.path.join(apiextensions, d), prefix, out)
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "kubernetes.proto"), "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    with open(os.path.join(here, "patch-metadata.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(header + sorted(set(PATCH))) + "\n")


if __name__ == "__main__":
    main()
