"""The helm commands our tests run, on Helm's own Go SDK (PyPI: helm-python-sdk).

Responsibility: give the chart tests `helm template`, `helm lint`, `helm install`,
`helm list`, `helm get manifest` and `helm uninstall` as Helm renders, lints and installs,
without a `helm` binary: every command calls Helm v4's SDK through the `helm_python` package.
Inputs: the command line (the helm CLI's own flags, the subset below). Outputs: what the helm
CLI prints for the same command (a YAML stream with `# Source:` comments, `--output json`
lists, lint's summary line); exit 1 with Helm's error on stderr when Helm refuses.

Only the flags the tests use are accepted; anything else is an error naming it, never ignored.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

try:
    import helm_python as helm
except ImportError as error:  # pragma: no cover - the message is the point
    sys.exit(
        f"helm.py needs the PyPI package helm-python-sdk ({error}); "
        "scripts/test installs it into target/test-tools/venv"
    )

# Helm's install order (pkg/release/util/kind_sorter.go), so `template` lists objects as the
# helm CLI does.
INSTALL_ORDER = [
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
    "PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
    "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
    "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
    "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
    "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
    "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
]


def merge(into: Any, update: Any) -> Any:
    """Merge `update` into `into` as repeated `--set` flags accumulate in Helm (strvals'
    ParseInto): maps key by key, lists index by index (a null an index gap left keeps what was
    there), anything else replaced."""
    if isinstance(into, dict) and isinstance(update, dict):
        for key, value in update.items():
            into[key] = merge(into.get(key), value) if key in into else value
        return into
    if isinstance(into, list) and isinstance(update, list):
        for index, value in enumerate(update):
            if index < len(into):
                if value is not None:
                    into[index] = merge(into[index], value)
            else:
                into.append(value)
        return into
    return update


def values(sets: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for expression in sets:
        out = merge(out, helm.parse_set_string(expression))
    return out


def kind_of(manifest: str) -> str:
    for line in manifest.splitlines():
        if line.startswith("kind:"):
            return line.split(":", 1)[1].strip()
    return ""


def order(item: tuple[str, str]) -> tuple[int, str]:
    kind = kind_of(item[1])
    rank = INSTALL_ORDER.index(kind) if kind in INSTALL_ORDER else len(INSTALL_ORDER)
    return rank, item[0]


def stream(documents: list[tuple[str, str]]) -> str:
    out = []
    for source, text in documents:
        out.append(f"---\n# Source: {source}\n{text.strip()}\n")
    return "".join(out)


def template(args: argparse.Namespace) -> None:
    with helm.Chart.load(args.chart) as chart:
        rendered = chart.render(
            values(args.set), name=args.release, namespace=args.namespace, is_install=True
        )
        documents = [
            (path, text)
            for path, text in rendered.items()
            if text.strip() and not path.endswith("NOTES.txt")
        ]
        documents.sort(key=order)
        crds = []
        if args.include_crds:
            crds = [(f"{chart.name}/{c['name']}", c["data"]) for c in chart.crds]
        sys.stdout.write(stream(crds + documents))


def lint(args: argparse.Namespace) -> None:
    report = helm.lint(
        args.chart,
        values(args.set),
        strict=args.strict,
        namespace=args.namespace,
        kube_version=args.kube_version,
    )
    severities = {1: "INFO", 2: "WARNING", 3: "ERROR"}
    for message in report.get("messages") or []:
        level = severities.get(message.get("severity"), "UNKNOWN")
        print(f"[{level}] {message.get('path')}: {message.get('error')}")
    worst = max((m.get("severity", 0) for m in report.get("messages") or []), default=0)
    failed = bool(report.get("errors")) or worst >= 3 or (args.strict and worst >= 2)
    linted = report.get("total_charts_linted", 0)
    print(f"{linted} chart(s) linted, {1 if failed else 0} chart(s) failed")
    if failed:
        for error in report.get("errors") or []:
            print(error, file=sys.stderr)
        sys.exit(1)


def config(args: argparse.Namespace) -> helm.Config:
    return helm.Config(kubeconfig_path=args.kubeconfig, namespace=args.namespace)


def install(args: argparse.Namespace) -> None:
    with config(args) as cfg:
        release = cfg.install(
            args.chart,
            args.release,
            values(args.set),
            namespace=args.namespace,
            create_namespace=args.create_namespace,
            timeout=args.timeout,
        )
        print(f"NAME: {release.get('name', args.release)}")
        print(f"STATUS: {release.get('status', '')}")


def releases(args: argparse.Namespace) -> None:
    with config(args) as cfg:
        found = cfg.list()
    rows = [
        {
            "name": release.get("name"),
            "namespace": release.get("namespace"),
            "revision": str(release.get("revision", "")),
            "updated": release.get("deployed_at", ""),
            "status": release.get("status"),
            "chart": f"{release.get('chart_name', '')}-{release.get('chart_version', '')}",
            "app_version": release.get("app_version", ""),
        }
        for release in found or []
    ]
    rows = [r for r in rows if r["namespace"] in (None, args.namespace)]
    if args.output != "json":
        sys.exit(f"helm.py list supports --output json only, not {args.output!r}")
    print(json.dumps(rows))


def get_manifest(args: argparse.Namespace) -> None:
    with config(args) as cfg:
        release = cfg.status(args.release)
    manifest = release.get("manifest")
    if manifest is None:
        sys.exit(f"Error: release {args.release!r} has no manifest")
    sys.stdout.write(manifest)


def uninstall(args: argparse.Namespace) -> None:
    with config(args) as cfg:
        cfg.uninstall(args.release, timeout=args.timeout)
    print(f'release "{args.release}" uninstalled')


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="helm.py", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, cluster: bool) -> None:
        p.add_argument("--namespace", "-n", default="default")
        if cluster:
            p.add_argument("--kubeconfig", required=True)

    p = commands.add_parser("template")
    p.add_argument("release")
    p.add_argument("chart")
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--include-crds", action="store_true")
    common(p, cluster=False)
    p.set_defaults(run=template)

    p = commands.add_parser("lint")
    p.add_argument("chart")
    p.add_argument("--strict", action="store_true")
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--kube-version")
    common(p, cluster=False)
    p.set_defaults(run=lint)

    p = commands.add_parser("install")
    p.add_argument("release")
    p.add_argument("chart")
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--create-namespace", action="store_true")
    p.add_argument("--timeout", type=int, default=300, help="seconds")
    common(p, cluster=True)
    p.set_defaults(run=install)

    p = commands.add_parser("list")
    p.add_argument("--output", "-o", default="json")
    common(p, cluster=True)
    p.set_defaults(run=releases)

    p = commands.add_parser("get")
    what = p.add_subparsers(dest="what", required=True)
    m = what.add_parser("manifest")
    m.add_argument("release")
    common(m, cluster=True)
    m.set_defaults(run=get_manifest)

    p = commands.add_parser("uninstall")
    p.add_argument("release")
    p.add_argument("--timeout", type=int, default=300, help="seconds")
    common(p, cluster=True)
    p.set_defaults(run=uninstall)
    return top


def main() -> None:
    args = parser().parse_args()
    try:
        args.run(args)
    except helm.HelmError as error:
        sys.exit(f"Error: {error}")


if __name__ == "__main__":
    main()
