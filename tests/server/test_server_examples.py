"""The deployment examples of the server (examples/server/): well-formed, probing /ready, and
never starting on a public address without a key."""

from __future__ import annotations

import yaml
from paths import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples" / "server"


def test_kubernetes_deployment_probes_ready_and_health() -> None:
    documents = list(yaml.safe_load_all((EXAMPLES / "kubernetes" / "tts-server.yaml").read_text()))
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    service = next(d for d in documents if d["kind"] == "Service")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    key = next(e for e in container["env"] if e["name"] == "POCKET_TTS_API_KEY")
    assert "secretKeyRef" in key["valueFrom"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_compose_puts_a_bot_runner_beside_the_server() -> None:
    compose = yaml.safe_load((EXAMPLES / "docker-compose.yml").read_text())
    tts, bot = compose["services"]["tts"], compose["services"]["bot"]
    assert "/ready" in " ".join(tts["healthcheck"]["test"])
    assert bot["environment"]["POCKET_TTS_SERVER_URL"] == "ws://tts:8000"
    assert bot["depends_on"]["tts"]["condition"] == "service_healthy"
    assert "POCKET_TTS_API_KEY" in tts["environment"]


def test_dockerfile_serves_on_all_addresses_so_it_needs_a_key() -> None:
    text = (EXAMPLES / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["pocket-tts-server", "--host", "0.0.0.0"' in text
    assert "POCKET_TTS_API_KEY" in text  # said at the top: it refuses to start without one


def test_kubernetes_grace_period_outlasts_the_drain() -> None:
    """The pod's grace period covers preStop and the server's whole drain (--drain-timeout)."""
    documents = list(yaml.safe_load_all((EXAMPLES / "kubernetes" / "tts-server.yaml").read_text()))
    spec = next(d for d in documents if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    container = spec["containers"][0]
    args = container["args"]
    drain = float(args[args.index("--drain-timeout") + 1])
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert spec["terminationGracePeriodSeconds"] > pre_stop + drain


def test_haproxy_checks_ready_and_keeps_websockets() -> None:
    text = (EXAMPLES / "haproxy.cfg").read_text()
    assert "option httpchk GET /ready" in text
    assert "timeout tunnel" in text  # websockets outlive the HTTP timeouts
    assert "retry-on conn-failure empty-response 503" in text
