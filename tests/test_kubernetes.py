"""The Kubernetes line (docs/multi-host.md): the JobSet manifest in examples/kubernetes parses, its fields are the
ones JAX's bootstrap reads (an Indexed Job, its parallelism, a service account allowed to read pods, Jobs and
services) and its command is a podracer command line that resumes; the docs show the file as it is; a pod without
JAX's kubernetes client is one line naming the extra. No cluster runs here."""

import importlib.util
import pathlib
import re

import pytest
import yaml

from podracer.run import config
from podracer.cli import parser
from podracer.run import lifetime, multihost

ROOT = pathlib.Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "examples" / "kubernetes" / "anakin-jobset.yaml"


def _documents():
    documents = list(yaml.safe_load_all(MANIFEST.read_text()))
    return {document["kind"]: document for document in documents}, documents


def _pod():
    kinds, _ = _documents()
    job = kinds["JobSet"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    return job, job["template"]["spec"]


def test_the_jobset_has_what_jax_bootstraps_from_and_restarts_the_run():
    kinds, documents = _documents()
    assert len(documents) == len(kinds) == 4 and set(kinds) == {"ServiceAccount", "Role", "RoleBinding", "JobSet"}
    jobset = kinds["JobSet"]
    assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert jobset["spec"]["failurePolicy"]["maxRestarts"] >= 1
    assert jobset["spec"]["network"]["enableDNSHostnames"] is True
    [replicated] = jobset["spec"]["replicatedJobs"]
    assert replicated["replicas"] == 1  # one Job: JAX counts processes by the Job's parallelism
    job, pod = _pod()
    assert job["completionMode"] == "Indexed" and job["parallelism"] == job["completions"] >= 2
    assert job["backoffLimit"] == 0 and pod["restartPolicy"] == "Never"  # the JobSet restarts, not the Job
    assert pod["terminationGracePeriodSeconds"] > lifetime.STOP_SECONDS
    # the pods run as the service account the Role is bound to, and the Role grants what JAX's bootstrap reads
    assert pod["serviceAccountName"] == kinds["ServiceAccount"]["metadata"]["name"]
    binding = kinds["RoleBinding"]
    assert binding["roleRef"]["name"] == kinds["Role"]["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": pod["serviceAccountName"]}]
    granted = {
        (group, resource, verb)
        for rule in kinds["Role"]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert {("", "pods", "list"), ("", "services", "list"), ("batch", "jobs", "get")} <= granted


@pytest.mark.suite("gymnax")
def test_the_pods_command_is_a_podracer_command_line_that_resumes_from_the_shared_volume():
    _, pod = _pod()
    [container] = pod["containers"]
    command = container["command"]
    assert command[:2] == ["podracer", "anakin"]
    cfg = parser.parse(config.AnakinConfig, command[2:])
    assert cfg.distributed and cfg.resume == "auto" and cfg.checkpoint_every_seconds is not None
    mounts = [mount["mountPath"] for mount in container["volumeMounts"]]
    for directory in (cfg.checkpoint_dir, cfg.log_dir):  # on the volume every pod shares, not in a pod's own disk
        assert any(directory.startswith(mount + "/") for mount in mounts), directory
    [volume] = pod["volumes"]
    assert volume["name"] == container["volumeMounts"][0]["name"] and "persistentVolumeClaim" in volume


def test_the_docs_show_the_manifest_as_it_is():
    text = (ROOT / "docs" / "multi-host.md").read_text()
    block = re.search(r"<!-- file: examples/kubernetes/anakin-jobset.yaml -->\n```yaml\n(.*?)```", text, re.DOTALL)
    assert block and block.group(1) == MANIFEST.read_text()


def test_a_pod_without_jaxs_kubernetes_client_is_one_line_naming_the_extra(monkeypatch):
    from podracer.core import install

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "kubernetes" else real(name, *a))
    with pytest.raises(ValueError) as error:
        multihost.check_cluster({"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert str(error.value) == (
        "--distributed in a Kubernetes pod needs JAX's kubernetes client to find the other pods: "
        f"{install.command('k8s')} (or start every process with --coordinator HOST:PORT --num-processes N "
        "--process-id I)."
    )
    multihost.check_cluster({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "SLURM_JOB_ID": "7"})  # JAX detects Slurm
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "kubernetes" else None)
    multihost.check_cluster({"KUBERNETES_SERVICE_HOST": "10.0.0.1"})  # the client is there: JAX bootstraps
