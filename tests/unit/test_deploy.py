"""The Kubernetes manifests in deploy/kubernetes: every object loads into lightkube's typed models
with no field lost (an unknown or misspelt field fails), every kustomization lists files that
exist, and the pieces fit together: the commands parse with rollguard's own parsers, selectors
select, the network policy lets only the roller reach 8443, and the roller's account may do
exactly what a roll does (its lease verbs proven on a real API server's RBAC in
tests/real/test_deploy_rbac.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube.core.resource_registry import resource_registry

from rollguard.agent import config as agent_config
from rollguard.roller import cli as roller_cli
from rollguard.roller.connect import cli as connect_cli
from rollguard.roller.roll.cli.options import RollOptions
from rollguard.shared.cli import Parser as AgentParser

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
KUSTOMIZATION = "kustomize.config.k8s.io/v1beta1"


def documents() -> list[tuple[Path, dict[str, Any]]]:
    found = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                found.append((path, doc))
    return found


DOCS = documents()
OBJECTS = [(p, d) for p, d in DOCS if d.get("apiVersion") != KUSTOMIZATION]
KUSTOMIZATIONS = [(p, d) for p, d in DOCS if d.get("apiVersion") == KUSTOMIZATION]


def _ids(items: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    return [f"{p.relative_to(DEPLOY)}:{d.get('kind')}" for p, d in items]


def first_difference(want: Any, got: Any, path: str = "") -> str | None:
    if isinstance(want, dict) and isinstance(got, dict):
        for key in want.keys() | got.keys():
            if key not in got:
                return f"{path}.{key} is not a field of the model (dropped)"
            if key not in want:
                if key in ("apiVersion", "kind"):
                    continue  # lightkube names the type of embedded objects (PVC templates)
                return f"{path}.{key} appeared"
            found = first_difference(want[key], got[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return f"{path}: {len(want)} items became {len(got)}"
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            found = first_difference(w, g, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if want == got else f"{path}: {want!r} became {got!r}"


@pytest.mark.parametrize(("path", "doc"), OBJECTS, ids=_ids(OBJECTS))
def test_every_object_loads_into_lightkubes_models_with_nothing_dropped(
    path: Path, doc: dict[str, Any]
) -> None:
    model = resource_registry.load(doc["apiVersion"], doc["kind"])
    assert model is not None, f"{path}: unknown kind {doc['apiVersion']}/{doc['kind']}"
    loaded = model.from_dict(doc, lazy=False)
    difference = first_difference(doc, loaded.to_dict())
    assert difference is None, f"{path}: {difference}"


def test_the_first_check_catches_a_misspelt_field() -> None:
    doc = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x", "lables": {}}}
    loaded = resource_registry.load("v1", "ServiceAccount").from_dict(doc, lazy=False)
    found = first_difference(doc, loaded.to_dict())
    assert found == ".metadata.lables is not a field of the model (dropped)"


@pytest.mark.parametrize(("path", "doc"), KUSTOMIZATIONS, ids=_ids(KUSTOMIZATIONS))
def test_kustomizations_list_what_exists_and_forget_nothing(
    path: Path, doc: dict[str, Any]
) -> None:
    assert doc["kind"] == "Kustomization"
    listed = set()
    for entry in doc.get("resources", []):
        target = (path.parent / entry).resolve()
        assert target.is_file() or (target / "kustomization.yaml").is_file(), f"{path}: {entry}"
        listed.add(target)
    # Every object file beside it is listed, except Jobs made with generateName, which are
    # created by hand (kubectl create) for each roll.
    for other, obj in OBJECTS:
        if other.parent == path.parent and obj.get("metadata", {}).get("generateName") is None:
            assert other.resolve() in listed, f"{other} is not in {path}"


def objects(folder: str, kind: str) -> list[dict[str, Any]]:
    return [d for p, d in OBJECTS if p.parent == DEPLOY / folder and d["kind"] == kind]


def one(folder: str, kind: str) -> dict[str, Any]:
    (found,) = objects(folder, kind)
    return found


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def container(pod_spec: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in pod_spec["containers"] if c["name"] == name]
    return found


def test_the_agent_sidecar_runs_with_flags_the_agent_accepts() -> None:
    sts = one("agent", "StatefulSet")
    pod = sts["spec"]["template"]
    agent = container(pod["spec"], "rollguard-agent")
    parser = agent_config.build_parser(AgentParser(prog="rollguard-agent"))
    env = {e["name"]: e.get("value", "kafka-0") for e in agent.get("env", [])}
    settings = agent_config.load(parser.parse_args(agent["args"]), env)
    # JMX stays on loopback, on both sides
    assert settings.jmx_url == "service:jmx:rmi:///jndi/rmi://127.0.0.1:9999/jmxrmi"
    kafka = container(pod["spec"], "kafka")
    (jmx_opts,) = [e["value"] for e in kafka["env"] if e["name"] == "KAFKA_JMX_OPTS"]
    assert "-Dcom.sun.management.jmxremote.host=127.0.0.1" in jmx_opts
    assert "-Dcom.sun.management.jmxremote.port=9999" in jmx_opts
    # the readiness probe asks the agent's probe port for /v1/ready
    probe = agent["readinessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in agent["ports"]}
    assert probe["path"] == "/v1/ready"
    assert ports[probe["port"]] == settings.probe_listen.port
    assert ports["agent"] == settings.listen.port == 8443
    # certificates come from Secrets mounted where the flags point
    mounts = {m["name"]: m["mountPath"] for m in agent["volumeMounts"]}
    volumes = pod["spec"]["volumes"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in volumes if "secret" in v}
    for path in (settings.tls_cert, settings.tls_key, settings.tls_ca):
        assert any(str(path).startswith(mounts[name] + "/") for name in secrets), path
    # the timeline is on the broker's persistent volume
    assert settings.data_dir is not None
    assert str(settings.data_dir).startswith(mounts["data"] + "/")
    assert selects(sts["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"])


def test_only_the_roller_reaches_the_agents_api() -> None:
    policy = one("agent", "NetworkPolicy")
    pod_labels = one("agent", "StatefulSet")["spec"]["template"]["metadata"]["labels"]
    assert selects(policy["spec"]["podSelector"]["matchLabels"], pod_labels)
    roller_labels = one("roller", "Job")["spec"]["template"]["metadata"]["labels"]
    opening_8443 = [
        rule for rule in policy["spec"]["ingress"]
        if any(p["port"] == 8443 for p in rule.get("ports", []))
    ]  # fmt: skip
    assert opening_8443, "no rule opens the agent's port"
    for rule in opening_8443:
        assert rule.get("from"), "8443 open to everyone"
        for peer in rule["from"]:
            assert set(peer) == {"podSelector"}  # same namespace, selected pods only
            assert selects(peer["podSelector"]["matchLabels"], roller_labels)
    other = {"app.kubernetes.io/name": "kafka-client"}
    assert not any(selects(p["podSelector"]["matchLabels"], other) for p in opening_8443[0]["from"])


def roller_args(args: list[str]) -> dict[str, Any]:
    parsed = roller_cli.build_parser().parse_args(args)
    if parsed.command == "roll":
        options: Any = RollOptions
    else:
        options = connect_cli.AutoRestartOptions
    values = options.read(parsed, {}, "ROLLGUARD_")
    return {flag.name: values[flag.field] for flag in options.flags()}


def test_the_roll_job_finds_the_brokers_and_their_agents() -> None:
    job = one("roller", "Job")
    spec = job["spec"]["template"]["spec"]
    values = roller_args(container(spec, "roll")["args"])
    sts = one("agent", "StatefulSet")
    service = one("agent", "Service")
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    selector = dict(term.split("=") for term in values["selector"].split(","))
    assert selects(selector, pod_labels)
    assert values["service"] == service["metadata"]["name"] == sts["spec"]["serviceName"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True  # recovering brokers are unready
    assert selects(service["spec"]["selector"], pod_labels)
    assert pod_labels[values["broker-role-label"]] == "true"
    assert pod_labels[values["controller-role-label"]] == "true"
    assert job["spec"]["backoffLimit"] == 0
    assert sts["spec"]["updateStrategy"]["type"] == "OnDelete"


def test_the_rollers_account_may_do_what_a_roll_does_and_no_more() -> None:
    account = one("roller", "ServiceAccount")
    binding = one("roller", "RoleBinding")
    role = one("roller", "Role")
    job_spec = one("roller", "Job")["spec"]["template"]["spec"]
    assert job_spec["serviceAccountName"] == account["metadata"]["name"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"]}]
    granted = {
        (group, resource): set(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert granted == {
        ("", "pods"): {"get", "list", "delete"},
        ("apps", "statefulsets"): {"get"},
        ("", "configmaps"): {"get", "list", "create", "update"},
        ("coordination.k8s.io", "leases"): {"get", "create", "update"},  # one roll at a time
    }


def test_the_strimzi_roll_job_and_the_connect_watcher_parse() -> None:
    strimzi = one("overlays/strimzi", "Job")["spec"]["template"]["spec"]
    values = roller_args(container(strimzi, "roll")["args"])
    assert "strimzi.io/cluster=my-cluster" in values["selector"]
    assert values["broker-role-label"] == "strimzi.io/broker-role"  # Strimzi's, the default
    watcher = one("connect", "Deployment")
    spec = watcher["spec"]["template"]["spec"]
    values = roller_args(container(spec, "auto-restart")["args"])
    assert values["state-configmap"] == ("kafka", "rollguard-connect-autorestart")
    assert watcher["spec"]["replicas"] == 1 and watcher["spec"]["strategy"]["type"] == "Recreate"
    role = one("connect", "Role")
    names = {n for rule in role["rules"] for n in rule.get("resourceNames", [])}
    assert names == {"rollguard-connect-autorestart"}
    assert spec["serviceAccountName"] == one("connect", "ServiceAccount")["metadata"]["name"]


def test_a_bad_flag_in_a_manifest_would_be_caught() -> None:
    with pytest.raises(SystemExit):
        roller_args(["roll", "--selectr=app=kafka"])
    parser = agent_config.build_parser(AgentParser(prog="rollguard-agent"))
    with pytest.raises(SystemExit):
        parser.parse_args(["--jmx-backnd=persistent"])
    assert isinstance(parser, argparse.ArgumentParser)
