"""The master's metrics and web view, through real tools: promtool, a Prometheus server, headless Chromium.

The tools are Debian's (prometheus, chromium, chromium-driver): installed here when missing.
"""

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gangsched.client.master_client import MasterClient, RequestRefused
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.jobs.synthetic_specs import job_spec
from gangsched.protocol.admin_messages import NodeAction
from gangsched.protocol.errors import ErrorCode
from gangsched.web.watch import IDLE_PERIOD_S, ClusterWatch
from tests.helpers.clusters import wait_until
from tests.helpers.web import TOKENS, answers, bound_address, get, web_base

pytestmark = pytest.mark.live

FOREVER = SyntheticJob("compute", iterations=0)


def free_port() -> int:
    """A port that was free a moment ago, for Prometheus's own listener, which cannot be told to take
    any free port and say which; gangsched's sockets bind port 0 and publish what they got."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def web_cluster(start_cluster):
    """A cluster whose master serves HTTP on a free loopback port; the base URL with it."""
    cluster = start_cluster(nodes=2, quantum_ms=200, http_bind="127.0.0.1:0")
    return cluster, web_base(cluster)


def metrics_with_jobs(cluster, base: str) -> str:
    for _ in range(2):
        cluster.client.submit(job_spec(FOREVER, 2))
    return wait_until(lambda: (text := get(f"{base}/metrics")[1]).count("gangsched_job_utilization_ratio{") == 2
                      and text, 30, "both jobs measured in the metrics")


def test_the_metrics_pass_promtool(web_cluster, debian):
    cluster, base = web_cluster
    text = metrics_with_jobs(cluster, base)
    check = subprocess.run([debian.tool("promtool", "prometheus"), "check", "metrics"], input=text,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    for name in ("gangsched_jobs{state=\"running\"} 2.0", "gangsched_nodes{state=\"up\"} 2.0",
                 "gangsched_switch_latency_seconds_bucket", "gangsched_quanta_total",
                 "gangsched_master_resident_memory_bytes", "gangsched_node_utilization_ratio{node=\"node1\"}",
                 "gangsched_node_memory_bytes{node=\"node1\"}", "gangsched_node_memory_committed_bytes{node=\"node1\"}",
                 "gangsched_job_max_rss_bytes{", 'gangsched_partition_jobs{partition="batch",state="running"} 2.0',
                 'gangsched_partition_nodes{partition="batch",state="up"} 2.0'):
        assert name in text


def test_a_prometheus_server_scrapes_the_master(web_cluster, tmp_path, debian):
    cluster, base = web_cluster
    metrics_with_jobs(cluster, base)
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(textwrap.dedent(f"""\
        global:
          scrape_interval: 1s
        scrape_configs:
          - job_name: gangsched
            authorization:
              credentials: "{TOKENS[base]}"
            static_configs:
              - targets: ["{base.removeprefix('http://')}"]
        """))
    server = subprocess.Popen(
        [debian.tool("prometheus", "prometheus"), f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'db'}",
         f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        query = urllib.parse.quote('gangsched_jobs{state="running"}')

        def running_jobs() -> float | None:
            try:
                status, body, _ = get(f"http://127.0.0.1:{port}/api/v1/query?query={query}")
            except OSError:
                return None
            if status != 200:  # starting
                return None
            result = json.loads(body).get("data", {}).get("result", [])
            return float(result[0]["value"][1]) if result else None

        assert wait_until(running_jobs, 60, "Prometheus to have scraped the running jobs") == 2.0
    finally:
        server.terminate()
        server.wait(10)


@pytest.mark.parametrize("bind", ["0.0.0.0:0", "127.0.0.1:0"])
def test_every_path_needs_the_token_on_loopback_too_and_a_loopback_view_a_loopback_host(start_cluster, bind):
    cluster = start_cluster(nodes=1, http_bind=bind)
    base = f"http://127.0.0.1:{bound_address(cluster.home / 'master').rpartition(':')[2]}"
    wait_until(lambda: answers(base, (200, 401)), 30, "the web server to answer")
    token = (cluster.home / "master" / "web-token").read_text().strip()
    for path in ("/", "/metrics", "/api/state", "/static/view.js"):
        assert get(base + path, {})[0] == 401
        assert get(base + path, {"Authorization": "Bearer wrong"})[0] == 401
        assert get(base + path, {"Authorization": f"Bearer {token}"})[0] == 200
    status, _, headers = get(f"{base}/?token={token}", {})
    assert status == 200 and "gang_web_token=" in headers.get("set-cookie", "")
    # a page of another site whose name points here (DNS rebinding): refused on loopback, whatever it shows
    rebound = get(base + "/api/state", {"Authorization": f"Bearer {token}", "Host": "evil.example"})[0]
    assert rebound == (400 if bind.startswith("127.") else 200)


def _ended(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_web_server_ends_on_sigterm_and_when_its_master_dies(tmp_path, monkeypatch):
    """It sleeps between checks for its end (web/server.py): a signal, or its master's death, still ends it."""
    monkeypatch.setenv("GANG_WEB_TOKEN", "a-token")  # the servers below take it from their environment

    def web(address_file: Path) -> list[str]:  # a master that never answers: the server runs all the same
        return [sys.executable, "-m", "gangsched.web", "--bind", "127.0.0.1:0", "--address-file", str(address_file),
                "--master", f"ipc://{tmp_path}/no-master.sock"]

    def serving(address_file: Path) -> bool:
        return address_file.exists() and answers(f"http://{address_file.read_text().strip()}", (200, 401))

    first = tmp_path / "first-address"
    server = subprocess.Popen([*web(first), "--parent", str(os.getpid())])
    try:
        wait_until(lambda: serving(first), 30, "the web server to answer")
        server.terminate()
        server.wait(10)
    finally:
        server.kill()

    # its master killed -9: the server, an orphan now, ends by itself
    second = tmp_path / "second-address"
    master = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, subprocess, time
        server = subprocess.Popen({web(second)!r} + ["--parent", str(os.getpid())])
        print(server.pid, flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)
    orphan = 0
    try:
        assert master.stdout is not None
        orphan = int(master.stdout.readline())
        wait_until(lambda: serving(second), 30, "the web server to answer")
        master.kill()
        master.wait()
        # within its check of the parent (1 s) and its last question to the master (5 s at most)
        wait_until(lambda: _ended(orphan), 20, "the orphaned web server to end")
    finally:
        master.kill()
        if orphan:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(orphan).kill()


def test_the_viewer_socket_only_reads(web_cluster):
    cluster, _ = web_cluster
    with MasterClient(f"ipc://{cluster.home / 'master' / 'viewer' / 'viewer.sock'}") as viewer:
        assert viewer.nodes()
        with pytest.raises(RequestRefused) as refused:
            viewer.submit(job_spec(FOREVER, 1))
    assert refused.value.code is ErrorCode.PERMISSION_DENIED


def test_the_view_reads_the_master_each_quantum_only_while_a_page_is_open(web_cluster):
    cluster, _ = web_cluster
    watch = ClusterWatch(f"ipc://{cluster.home / 'master' / 'viewer' / 'viewer.sock'}", quantum_ms=200)

    async def reads() -> tuple[int, int]:
        follow = asyncio.create_task(watch.follow())
        try:
            await asyncio.wait_for(watch.next_after(0), 10)  # the first read
            unwatched = watch.version
            await asyncio.sleep(IDLE_PERIOD_S / 2)  # a window well inside the idle period
            unwatched = watch.version - unwatched
            async with watch.watching():
                watched = watch.version
                await asyncio.wait_for(watch.next_after(watched + 4), 10)  # five quanta, each read
                return unwatched, watch.version - watched
        finally:
            follow.cancel()

    try:
        unwatched, watched = asyncio.run(reads())
    finally:
        watch.close()
    assert unwatched == 0 and watched >= 5


@pytest.fixture
def browser(debian) -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = debian.tool("chromium", "chromium")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1100,900"):
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="gang-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(options=options, service=Service(debian.tool("chromedriver", "chromium-driver")))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_the_page_shows_the_matrix_live_in_headless_chromium(web_cluster, browser):
    from selenium.webdriver.common.by import By

    cluster, base = web_cluster
    jobs = [cluster.client.submit(job_spec(FOREVER, 2)) for _ in range(2)]
    browser.get(f"{base}/?token={TOKENS[base]}")  # its cookie then serves the page's own requests

    def cells() -> set[str]:
        # read in one script: the page redraws the matrix every quantum, so a cell found first may be gone
        return set(browser.execute_script(
            "return [...document.querySelectorAll('#matrix td.job')].map((cell) => cell.dataset.job);"))

    wait_until(lambda: cells() == {str(job) for job in jobs}, 30, "both jobs in the page's matrix")
    quantum = browser.find_element(By.ID, "quantum")
    first = quantum.get_attribute("data-running")
    wait_until(lambda: quantum.get_attribute("data-running") != first, 10, "the running slot to change")
    wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#charts .chart")) == 2, 10,
               "a utilization chart per job")
    # each node holds a task of both jobs, 128M each (the master's default): committed / total MiB
    wait_until(lambda: sum(text.startswith("256/") for text in browser.execute_script(
        "return [...document.querySelectorAll('#nodes td.number')].map((cell) => cell.textContent);")) == 2,
        10, "each node's committed memory")
    screenshot = Path(tempfile.gettempdir()) / "gangsched-web-view.png"
    assert browser.save_screenshot(str(screenshot))


def test_the_page_shows_each_partitions_matrix(start_cluster, tmp_path, browser):
    config = tmp_path / "gangsched.toml"
    config.write_text('[[nodes]]\nnames = "node[1-2]"\n[[partitions]]\nname = "batch"\nnodes = "node1"\n'
                      '[[partitions]]\nname = "debug"\nnodes = "node2"\n')
    cluster = start_cluster(config_file=config, http_bind="127.0.0.1:0")
    base = web_base(cluster)
    batch = cluster.client.submit(job_spec(FOREVER, 1))
    debug = cluster.client.submit(job_spec(FOREVER, 1).model_copy(update={"partition": "debug"}))
    browser.get(f"{base}/?token={TOKENS[base]}")

    def shown() -> tuple[list[str], set[str]]:
        return tuple(browser.execute_script(  # type: ignore[return-value]
            "return [[...document.querySelectorAll('#partition option')].map((option) => option.textContent),"
            " [...document.querySelectorAll('#matrix td.job')].map((cell) => cell.dataset.job)];"))

    wait_until(lambda: shown()[0] == ["batch *", "debug"] and set(shown()[1]) == {str(batch)}, 30,
               "the default partition's matrix, and both partitions to choose from")
    browser.execute_script("const select = document.getElementById('partition'); select.value = 'debug';"
                           " select.dispatchEvent(new Event('change'));")
    wait_until(lambda: set(shown()[1]) == {str(debug)}, 30, "the debug partition's matrix")


@pytest.mark.skipif(os.geteuid() != 0, reason="draining and booking are root's")
def test_the_page_shows_node_states_reasons_holds_and_reservations(start_cluster, browser):
    cluster = start_cluster(nodes=2, http_bind="127.0.0.1:0")
    base = web_base(cluster)
    client = cluster.client
    client.update_nodes("node2", NodeAction.DRAIN, "fan noise")
    client.create_reservation("maint", "node1", "now+1hours", "1:00:00", None, [])
    held = client.submit_jobs(job_spec(FOREVER, 1), None, hold=True)[0]
    browser.get(f"{base}/?token={TOKENS[base]}")

    def table(name: str) -> list[list[str]]:
        return browser.execute_script(  # type: ignore[no-any-return]
            f"return [...document.querySelectorAll('#{name} tr')].slice(1)"
            ".map((row) => [...row.cells].map((cell) => cell.textContent));")

    wait_until(lambda: ["node2", "drained", "fan noise (root)"] in [row[:3] for row in table("nodes")], 30,
               "the drained node and its reason")
    wait_until(lambda: [row[0] for row in table("reservations")] == ["maint"], 30, "the reservation")
    wait_until(lambda: any(row[0] == str(held) and row[-1] == "(JobHeldUser)" for row in table("queue")), 30,
               "the held job and its reason")
    text = get(base + "/metrics")[1]
    for name in ('gangsched_nodes{state="drained"} 1.0', 'gangsched_reservation_nodes{reservation="maint"} 1.0',
                 'gangsched_queue_jobs{reason="JobHeldUser"} 1.0'):
        assert name in text, name
