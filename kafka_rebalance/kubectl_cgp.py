"""`kubectl cgp`: status, waiting plans and approvals of ConsumerGroupPolicies from kubectl.

Installed as the console script `kubectl-cgp`, which kubectl finds on $PATH as a plugin, so
`kubectl cgp status` works. kubectl passes no connection flags to plugins: this command reads
the same $KUBECONFIG / ~/.kube/config (or `--kubeconfig`, `--context`) through the official
Kubernetes client, which comes with the `watch` or `operator` extra.

- `status [NAME]` (or `get`): every policy (or one) with lag, imbalance, epoch, age and, when
  not Ready, the reason; `-o table|wide|json|yaml|name`, `-l` selector, `-A`, `-w` watch. One
  policy in table form also lists its conditions.
- `plan NAME`: the waiting proposal as moves from the applied ConfigMaps, computed by the
  planner's own move function.
- `approve NAME`: sets spec.approvedPlan to the waiting proposal's hash (a merge patch with field
  manager `kubectl-cgp`); for an object a GitOps tool manages it also prints the change to commit,
  since the next sync would otherwise put Git's value back.
  `--wait` then polls until status.appliedPlan is the hash (or `--timeout` passes: exit 1).
- Every failure is one line (`cgp_errors`) and exit 1; never a traceback.
- `version`: the plugin's version; `completion SHELL`: a completion script (shtab);
  `kubectl_complete-cgp` (complete_main): the candidates kubectl's own completion asks for.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from kafka_rebalance_common.assignment import Assignment, MemberPartitions

from kafka_rebalance import cgp_errors, cgp_report, completion
from kafka_rebalance.cgp_errors import Request
from kafka_rebalance.version import version

GROUP, VERSION, PLURAL = "kafka-rebalance.io", "v1alpha1", "consumergrouppolicies"
FIELD_MANAGER = "kubectl-cgp"
INSTALL_HINT = (
    "kubectl cgp: the Python package 'kubernetes' is not installed; it comes with the 'kubectl' "
    "(or 'operator') extra: pip install 'kafka-rebalance[kubectl]'"
)
STATUS_COLUMNS = [
    ("namespace", "NAMESPACE"),
    ("name", "NAME"),
    ("group", "GROUP"),
    ("members", "MEMBERS"),
    ("lag", "LAG"),
    ("imbalance", "IMBALANCE"),
    ("epoch", "EPOCH"),
    ("ready", "READY"),
    ("reason", "REASON"),
    ("proposal", "PROPOSAL"),
    ("age", "AGE"),
]
MOVE_COLUMNS = [("topic", "TOPIC"), ("partition", "PARTITION"), ("from", "FROM"), ("to", "TO")]
ASSIGNMENT_COLUMNS = [("member", "MEMBER"), ("topic", "TOPIC"), ("partitions", "PARTITIONS")]
CONDITION_COLUMNS = [
    ("type", "TYPE"),
    ("status", "STATUS"),
    ("reason", "REASON"),
    ("since", "SINCE"),
    ("message", "MESSAGE"),
]
RESOURCE = f"{PLURAL[:-3]}y.{GROUP}"  # consumergrouppolicy.kafka-rebalance.io, as `kubectl -o name`


class CommandError(RuntimeError):
    """A one-line failure for the user (exit 1)."""


def build_parser(prog: str = "kubectl cgp") -> argparse.ArgumentParser:
    # The connection flags are accepted before and after the subcommand (`kubectl cgp plan X
    # -n ns` as kubectl users type it); SUPPRESS keeps a later absence from erasing them.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--kubeconfig",
        default=argparse.SUPPRESS,
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)",
    )
    common.add_argument("--context", default=argparse.SUPPRESS, help="kubeconfig context")
    common.add_argument(
        "-n", "--namespace", default=argparse.SUPPRESS, help="namespace (default: the context's)"
    )
    parser = argparse.ArgumentParser(
        prog=prog,
        description="ConsumerGroupPolicy status, plans and approvals.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"kubectl-cgp {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    status = commands.add_parser(
        "status",
        aliases=["get"],
        help="every policy (or NAME): lag, imbalance, epoch, reason",
        parents=[common],
    )
    status.add_argument("name", nargs="?", help="one policy (default: all of the namespace)")
    status.add_argument("-A", "--all-namespaces", action="store_true")
    status.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="after the list, print a row per change until interrupted (Ctrl-C)",
    )
    status.add_argument(
        "-l", "--selector", help="only policies whose labels match (kubectl's syntax: k=v,k!=v)"
    )
    status.add_argument(
        "-o", "--output", choices=("table", "wide", "json", "yaml", "name"), default="table"
    )
    plan = commands.add_parser(
        "plan", help="the waiting proposal of NAME as a table of moves", parents=[common]
    )
    plan.add_argument("name")
    plan.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    approve = commands.add_parser(
        "approve", help="approve the waiting proposal of NAME", parents=[common]
    )
    approve.add_argument("name")
    approve.add_argument(
        "--expect", metavar="HASH", help="approve only if the waiting proposal still has HASH"
    )
    approve.add_argument(
        "--wait",
        action="store_true",
        help="then wait until the operator has applied the plan (status.appliedPlan)",
    )
    approve.add_argument(
        "--timeout",
        default="2m",
        metavar="DURATION",
        help="how long --wait waits (e.g. 30s, 2m, 1m30s; default 2m); exit 1 when it passes",
    )
    commands.add_parser("version", help="print the plugin's version")
    completion.add_subcommand(commands, "kubectl cgp")
    return parser


def owned_by_member(configmaps: list[dict[str, Any]]) -> Assignment:
    """Each member's partitions from its assignment ConfigMap, read with the wire module the
    operator and the sidecars share (not the operator's reader: it needs numpy, which the
    `kubectl` extra does not install). A ConfigMap without a readable document is skipped, as
    the operator skips it (and rewrites it)."""
    from kafka_rebalance_common import wire
    from kafka_rebalance_operator import names

    owned: dict[str, MemberPartitions] = {}
    for item in configmaps:
        text = (item.get("data") or {}).get(names.DATA_KEY)
        try:
            document = wire.decode_document(text) if text else None
        except wire.DocumentError:
            continue
        if document is not None:
            owned[document.member] = document.partitions  # ascending, as decoded
    return Assignment(owned)


class Cluster:
    """The few API calls the plugin makes, through the official client."""

    def __init__(self, kubeconfig: str | None, context: str | None) -> None:
        from kubernetes import client, config

        try:
            self.api = config.new_client_from_config(config_file=kubeconfig, context=context)
            _, active = config.list_kube_config_contexts(config_file=kubeconfig)
            if context:
                contexts, _ = config.list_kube_config_contexts(config_file=kubeconfig)
                active = next(c for c in contexts if c["name"] == context)
        except (config.ConfigException, OSError, StopIteration) as error:
            raise CommandError(f"kubeconfig: {error}") from None
        self.default_namespace = (active.get("context") or {}).get("namespace") or "default"
        self.server = str(self.api.configuration.host)
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)

    def _call(self, request: Request, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """`fn(...)`, every failure a one-line CommandError naming `request` (no traceback)."""
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, **kwargs)
        except ApiException as error:
            line = cgp_errors.api_error(error.status or 0, error.reason or "", error.body, request)
            raise CommandError(line) from None
        except (HTTPError, OSError) as error:
            raise CommandError(cgp_errors.unreachable(self.server, error)) from None

    def policies(self, namespace: str | None, selector: str | None = None) -> list[dict[str, Any]]:
        """Every policy of `namespace` (None: of all) whose labels match `selector`; the API
        server filters, so a selector it cannot parse is its one-line 400."""
        options = {"label_selector": selector} if selector else {}
        if namespace is None:
            result = self._call(
                Request("list", None),
                self.custom.list_cluster_custom_object,
                GROUP,
                VERSION,
                PLURAL,
                **options,
            )
        else:
            result = self._call(
                Request("list", namespace),
                self.custom.list_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                **options,
            )
        return list(result.get("items") or [])

    def policy(self, namespace: str, name: str) -> dict[str, Any]:
        return self._call(
            Request("get", namespace, name),
            self.custom.get_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
        )

    def watch_policies(
        self, namespace: str | None, selector: str | None, name: str | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """("ADDED", policy) for the current list, then (type, policy) for every change,
        for ever; `name`: that policy only (a field selector, as kubectl's). The watch resumes
        from the last resourceVersion it saw when the API server ends it (it does, every few
        minutes) and lists again when that version has expired (410)."""
        from kubernetes import watch
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import HTTPError

        request = Request("watch", namespace)
        options: dict[str, Any] = {"label_selector": selector} if selector else {}
        if name is not None:
            options["field_selector"] = f"metadata.name={name}"
        fn: Any
        args: tuple[str, ...]
        if namespace is None:
            fn, args = self.custom.list_cluster_custom_object, (GROUP, VERSION, PLURAL)
        else:
            fn, args = (
                self.custom.list_namespaced_custom_object,
                (GROUP, VERSION, namespace, PLURAL),
            )
        while True:
            listed = self._call(Request("list", namespace), fn, *args, **options)
            items = sorted(
                listed.get("items") or [],
                key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]),
            )
            for policy in items:
                yield "ADDED", policy
            version = (listed.get("metadata") or {}).get("resourceVersion")
            try:
                while True:
                    stream = watch.Watch().stream(fn, *args, resource_version=version, **options)
                    for event in stream:
                        policy = event["object"]
                        if event["type"] == "ERROR":
                            raise ApiException(status=policy.get("code"), reason="watch")
                        if event["type"] == "BOOKMARK":
                            continue
                        version = policy["metadata"].get("resourceVersion", version)
                        yield event["type"], policy
            except ApiException as error:
                if error.status != 410:  # 410 Gone: too old a version; list again
                    raise CommandError(
                        cgp_errors.api_error(
                            error.status or 0, error.reason or "", error.body, request
                        )
                    ) from None
            except (HTTPError, OSError) as error:
                raise CommandError(cgp_errors.unreachable(self.server, error)) from None

    def applied_assignment(self, namespace: str, name: str) -> Assignment:
        """What the policy's ConfigMaps say each member owns."""
        from kafka_rebalance_operator import names

        response = self._call(
            Request("list", namespace, resource="configmaps"),
            self.core.list_namespaced_config_map,
            namespace,
            label_selector=f"{names.LABEL_POLICY}={names.label_value(name)},"
            f"{names.LABEL_MANAGED_BY}={names.MANAGER}",
            _preload_content=False,
        )
        return owned_by_member(json.loads(response.data).get("items") or [])

    def approve(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self._call(
            Request("patch", namespace, name),
            self.custom.patch_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            patch,
            field_manager=FIELD_MANAGER,
        )


def cmd_status(cluster: Cluster, args: argparse.Namespace) -> int:
    if args.name is not None:
        if args.all_namespaces or args.selector:
            raise CommandError("a policy NAME excludes -A and -l")
        if args.watch:
            return _watch(cluster, args.namespace or cluster.default_namespace, args, args.name)
        return _status_of_one(cluster, args)
    namespace = None if args.all_namespaces else (args.namespace or cluster.default_namespace)
    if args.watch:
        return _watch(cluster, namespace, args)
    policies = cluster.policies(namespace, args.selector)
    policies.sort(key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]))
    rows = [cgp_report.status_row(p) for p in policies]
    if args.output in ("json", "yaml", "name"):
        _print_structured(rows, args.output)
        return 0
    rows = [_with_age(row, p) for row, p in zip(rows, policies, strict=True)]
    if not rows:
        where = "any namespace" if namespace is None else f"namespace {namespace}"
        print(f"No ConsumerGroupPolicies found in {where}.", file=sys.stderr)
        return 0
    columns = STATUS_COLUMNS + ([("message", "MESSAGE")] if args.output == "wide" else [])
    print(cgp_report.table(rows, columns))
    return 0


def _watch(
    cluster: Cluster, namespace: str | None, args: argparse.Namespace, name: str | None = None
) -> int:
    """`-w`: the current rows, then one per change the API's watch reports, until Ctrl-C (exit
    0, like kubectl); with a NAME, that policy's. Rows keep the first rows' column widths,
    widening only when they must."""
    columns = STATUS_COLUMNS + ([("message", "MESSAGE")] if args.output == "wide" else [])
    widths: list[int] | None = None
    try:
        for _, policy in cluster.watch_policies(namespace, args.selector, name):
            row = cgp_report.status_row(policy)
            if args.output == "name":
                print(f"{RESOURCE}/{row['name']}", flush=True)
            elif args.output == "json":
                print(json.dumps(row), flush=True)
            elif args.output == "yaml":
                import yaml

                print("---\n" + yaml.safe_dump(row, sort_keys=False), end="", flush=True)
            else:
                lines, later = cgp_report.table_lines([_with_age(row, policy)], columns, widths)
                print("\n".join(lines if widths is None else lines[1:]), flush=True)
                widths = later
    except KeyboardInterrupt:
        return 0
    return 0


def _status_of_one(cluster: Cluster, args: argparse.Namespace) -> int:
    """One policy: its row, then (table and wide) its conditions; json/yaml add them as a list."""
    namespace = args.namespace or cluster.default_namespace
    policy = cluster.policy(namespace, args.name)
    row = cgp_report.status_row(policy)
    found = list((policy.get("status") or {}).get("conditions") or [])
    members, tasks = cgp_report.streams_members(policy)
    share = cgp_report.share_summary(policy)
    if args.output in ("json", "yaml", "name"):
        extra: dict[str, Any] = {"streamsMembers": members} if tasks is not None else {}
        if share is not None:
            extra["share"] = (policy.get("status") or {}).get("share")
        _print_structured(row | {"conditions": found} | extra, args.output)
        return 0
    columns = STATUS_COLUMNS + ([("message", "MESSAGE")] if args.output == "wide" else [])
    print(cgp_report.table([_with_age(row, policy)], columns))
    if found:
        print()
        since = [c | {"since": cgp_report.age(c.get("lastTransitionTime"))} for c in found]
        print(cgp_report.table(since, CONDITION_COLUMNS))
    if tasks is not None:  # a streams group: its tasks per member
        print()
        print(f"{tasks} tasks")
        if members:
            print(cgp_report.table(members, cgp_report.STREAMS_MEMBER_COLUMNS))
    if share is not None:  # a share group: its consumers per partition
        line, rows = share
        print()
        print(line)
        if rows:
            print(cgp_report.table(rows, cgp_report.SHARE_PARTITION_COLUMNS))
    return 0


def _with_age(row: dict[str, Any], policy: dict[str, Any]) -> dict[str, Any]:
    """A table row with kubectl's AGE; json/yaml keep the rows without it (no clock in them)."""
    return row | {"age": cgp_report.age((policy.get("metadata") or {}).get("creationTimestamp"))}


def _print_structured(data: dict[str, Any] | list[dict[str, Any]], output: str) -> None:
    rows = data if isinstance(data, list) else [data]
    if output == "name":
        for row in rows:
            print(f"{RESOURCE}/{row['name']}")
    elif output == "yaml":
        import yaml  # the Kubernetes client's own dependency

        print(yaml.safe_dump(data, sort_keys=False), end="")
    else:
        print(json.dumps(data, indent=2))


def cmd_plan(cluster: Cluster, args: argparse.Namespace) -> int:
    namespace = args.namespace or cluster.default_namespace
    policy = cluster.policy(namespace, args.name)
    hash_, proposed = cgp_report.proposal_assignment(policy)
    current = cluster.applied_assignment(namespace, args.name)
    moves = cgp_report.proposal_moves(current, proposed)
    proposal = policy["status"]["proposal"]
    if args.output in ("json", "yaml"):
        structured = {"hash": hash_, "moves": moves, "assignment": proposed.to_dict()}
        _print_structured(structured, args.output)
        return 0
    print(
        f"Proposal {hash_} for {namespace}/{args.name}: epoch {proposal.get('epoch', '?')}, "
        f"{len(moves)} partitions move, imbalance {_ratio(proposal.get('before'))} -> "
        f"{_ratio(proposal.get('after'))}, computed {cgp_report.age(proposal.get('generatedAt'))} "
        "ago"
    )
    if moves:
        print(cgp_report.table(moves, MOVE_COLUMNS))
    if not any(current.values()):
        # The first plan for a group (observe/propose on an existing group): nothing applied,
        # so every partition is a grant and nothing "moves". Show who would get what.
        print("No plan applied yet: every partition is granted, none moves. Proposed assignment:")
        rows = [
            {"member": member, "topic": topic, "partitions": ",".join(map(str, partitions))}
            for member, topics in sorted(proposed.items())
            for topic, partitions in sorted(topics.items())
            if partitions
        ]
        print(cgp_report.table(rows, ASSIGNMENT_COLUMNS))
    print(f"Approve it with: kubectl cgp approve {args.name} -n {namespace}")
    return 0


def cmd_approve(cluster: Cluster, args: argparse.Namespace) -> int:
    namespace = args.namespace or cluster.default_namespace
    if args.wait:
        _timeout(args.timeout)  # refused before anything is approved
    policy = cluster.policy(namespace, args.name)
    hash_ = str(((policy.get("status") or {}).get("proposal") or {}).get("hash") or "")
    if not hash_:
        raise CommandError(f"policy {namespace}/{args.name} has no proposal waiting for approval")
    if args.expect is not None and args.expect != hash_:
        raise CommandError(
            f"policy {namespace}/{args.name}: the waiting proposal is {hash_}, not {args.expect} "
            "(the plan changed: review it again with kubectl cgp plan)"
        )
    patch = cgp_report.approval_patch(hash_)
    if (policy.get("spec") or {}).get("approvedPlan") == hash_:
        print(f"{namespace}/{args.name}: proposal {hash_} is already approved")
    else:
        cluster.approve(namespace, args.name, patch)
        print(f"{namespace}/{args.name}: approved proposal {hash_} (spec.approvedPlan)")
    managers = cgp_report.gitops_managers(policy)
    if managers:
        print(
            f"This policy is managed by {' and '.join(managers)}: commit the same change to Git, "
            "or the next sync may put Git's spec.approvedPlan back. Patch for the policy's "
            "manifest:"
        )
        print(f"spec:\n  approvedPlan: {json.dumps(hash_)}")
    if args.wait:  # after the Git patch, which matters even when the wait runs out
        _wait_until_applied(cluster, namespace, args.name, hash_, args.timeout)
    return 0


WAIT_POLL_SECONDS = 1.0


def _timeout(text: str) -> float:
    from kafka_rebalance_operator.durations import DurationError, parse_duration

    try:
        return parse_duration(text)
    except DurationError as error:
        raise CommandError(f"--timeout: {error}") from None


def _wait_until_applied(
    cluster: Cluster, namespace: str, name: str, hash_: str, timeout_text: str
) -> None:
    """Poll the policy until status.appliedPlan is `hash_` (the operator writes it after the
    ConfigMaps, or the brokers' plan, carry the plan), or fail in one line when `timeout_text`
    has passed. A GET per second costs the API server less than a watch's connection for the
    minute or two this lasts, and survives the API server closing watches."""
    deadline = time.monotonic() + _timeout(timeout_text)
    while True:
        status = cluster.policy(namespace, name).get("status") or {}
        if status.get("appliedPlan") == hash_:
            print(f"{namespace}/{name}: plan {hash_} applied (epoch {status.get('epoch', '?')})")
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            ready = cgp_report.ready_condition({"status": status})
            why = (
                f"; Ready={ready.get('status')} {ready.get('reason', '')}".rstrip() if ready else ""
            )
            raise CommandError(
                f"policy {namespace}/{name}: plan {hash_} not applied within {timeout_text} "
                f"(status.appliedPlan is {status.get('appliedPlan') or 'empty'}{why})"
            )
        time.sleep(min(WAIT_POLL_SECONDS, remaining))


def _ratio(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) else "?"


COMMANDS = {"status": cmd_status, "get": cmd_status, "plan": cmd_plan, "approve": cmd_approve}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for option in ("kubeconfig", "context", "namespace"):
        if not hasattr(args, option):
            setattr(args, option, None)
    # Neither needs a cluster (nor the Kubernetes client).
    if args.command == "version":
        print(f"kubectl-cgp {version()}")
        return 0
    if args.command == "completion":
        try:
            print(completion.script(build_parser("kubectl-cgp"), args.shell))
        except ModuleNotFoundError:
            print(
                "kubectl cgp completion: the Python package 'shtab' is not installed; it comes "
                "with the 'kubectl' extra: pip install 'kafka-rebalance[kubectl]'",
                file=sys.stderr,
            )
            return 2
        return 0
    try:
        import kubernetes  # noqa: F401
    except ModuleNotFoundError:
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    try:
        cluster = Cluster(args.kubeconfig, args.context)
        return COMMANDS[args.command](cluster, args)
    except (CommandError, cgp_report.ReportError) as error:
        print(f"kubectl cgp {args.command}: {error}", file=sys.stderr)
        return 1


def complete_main(argv: Sequence[str] | None = None) -> int:
    """`kubectl_complete-cgp`: kubectl (1.26+) runs it to complete `kubectl cgp ...` and reads
    Cobra's answer: one candidate per line, then `:<directive>`."""
    words = list(sys.argv[1:] if argv is None else argv) or [""]
    for candidate in completion.candidates(build_parser(), words):
        print(candidate)
    print(f":{completion.NO_FILE_COMPLETION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
