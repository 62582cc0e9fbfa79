"""The whole redactor on ~70 MB of node journal text: MB/s per core, against Python `re` alone.

    .venv/bin/python benchmarks/bench_redaction.py [--mb 70] [--rounds 1]

The journal is generated here in the shapes a GPU node's journal holds (each shape below says
where it was seen, and how often it comes): kubelet and containerd through `journalctl -o
short-precise`, cloud-init's own log, and 2 lines in 10,000 that hold a credential (a bearer
token a client logged, a registry login), so that the rules have work to do as on a node.
The same text is masked twice in this process, each figure taken in CPU seconds
(`time.process_time()` and the children's: grep, where it runs), so it holds on a busy machine:

- the redactor as collect runs it (the multi-pattern engine finds where a rule may match);
- the same redactor with the engine switched off, every search done by Python `re` and
  `str.find` (the peer; what a machine without the engine's wheel runs).

Both must produce the same bytes; the benchmark stops if they do not.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figures import figure

try:
    from mignurse.collect import scanner
except ImportError:
    scanner = None  # type: ignore
from mignurse.collect.bundle import keep_large_blocks
from mignurse.collect.redact import TRIGGER_SHAPES, TRIGGERS, mask_secrets

HOST = "ip-10-0-37-142.us-west-2.compute.internal"

# journalctl -o short-precise (systemd/systemd-stable@v252 src/shared/logs-show.c,
# OUTPUT_SHORT_PRECISE) of kubelet and containerd on Amazon Linux 2023 (awslabs/amazon-eks-ami
# @v20260724 log-collector-script/linux/eks-log-collector.sh collects these units); klog's
# header (kubernetes/klog@v2.130.1 klog.go formatHeader)
JOURNAL = "Nov 29 {clock}.{us:06d} " + HOST + " {body}"
KLOG = "kubelet[2391]: {sev}1129 {clock}.{us:06d}    2391 {body}"
CONTAINERD = 'containerd[1930]: time="2026-11-29T{clock}.{us:06d}000Z" level={level} msg={body}'
# cloud-init's own log (canonical/cloud-init@22.2.2 cloudinit/log.py DEF_CON_FORMAT), written
# at boot only
CLOUD_INIT = "2026-11-29 {clock},{ms:03d} - {body}"

# (lines per 10,000, how the line is written, the line): a node in steady state with a pod in
# CrashLoopBackOff, its readiness probe failing, and a few image pulls
SHAPES: tuple[tuple[int, str, str], ...] = (
    # kubernetes/kubernetes@v1.32.0 pkg/kubelet/kubelet.go (syncLoopIteration)
    (1500, "klog I", 'kubelet.go:2468] "SyncLoop UPDATE" source="api" pods=["{ns}/{pod}"]'),
    (
        1000,
        "klog I",
        'kubelet.go:2470] "SyncLoop (PLEG): event for pod" pod="{ns}/{pod}" event={{"ID":"{uid}",'
        '"Type":"ContainerStarted","Data":"{digest}"}}',
    ),
    # kubernetes/kubernetes@v1.32.0 pkg/kubelet/pod_workers.go
    (
        1200,
        "klog E",
        'pod_workers.go:1301] "Error syncing pod, skipping" err="failed to \\"StartContainer\\" '
        'for \\"vllm\\" with CrashLoopBackOff: \\"back-off 5m0s restarting failed '
        'container=vllm pod={pod}_{ns}({uid})\\"" pod="{ns}/{pod}" podUID="{uid}"',
    ),
    # kubernetes/kubernetes@v1.32.0 pkg/kubelet/prober/prober.go
    (
        800,
        "klog I",
        'prober.go:107] "Probe failed" probeType="Readiness" pod="{ns}/{pod}" podUID="{uid}" '
        'containerName="vllm" probeResult="failure" output="Get \\"http://10.0.{a}.{b}:8000/'
        'health\\": dial tcp 10.0.{a}.{b}:8000: connect: connection refused"',
    ),
    # kubernetes/kubernetes@v1.32.0 pkg/volume/util/operationexecutor/operation_generator.go
    (
        800,
        "klog I",
        'operation_generator.go:637] "MountVolume.SetUp succeeded for volume \\"kube-api-access-'
        '{short}\\" (UniqueName: \\"kubernetes.io/projected/{uid}-kube-api-access-{short}\\") '
        'pod \\"{pod}\\" (UID: \\"{uid}\\") " pod="{ns}/{pod}"',
    ),
    # kubernetes/client-go@v0.32.0 tools/cache/reflector.go (ListAndWatch, "Caches populated")
    (
        100,
        "klog I",
        'reflector.go:368] Caches populated for *v1.Secret from object-"{ns}"/"hf-token-{short}"',
    ),
    # kubernetes/kubernetes@v1.32.0 pkg/kubelet/kubelet_node_status.go
    (
        400,
        "klog I",
        'kubelet_node_status.go:501] "Fast updating node status as it just became ready"',
    ),
    # kubernetes/kubernetes@v1.32.0 pkg/kubelet/cm/devicemanager/manager.go
    (
        600,
        "klog I",
        'manager.go:831] "Looking for needed resources" needed=1 resourceName="nvidia.com/gpu"',
    ),
    # containerd/containerd@v2.1.4 internal/cri/server (logrus text lines in the journal)
    (1200, "containerd info", '"StartContainer for \\"{digest}\\" returns successfully"'),
    (
        1000,
        "containerd info",
        '"RunPodSandbox for &PodSandboxMetadata{{Name:{pod},Uid:{uid},Namespace:{ns},Attempt:0,}} '
        'returns sandbox id \\"{digest}\\""',
    ),
    (
        800,
        "containerd error",
        '"failed to load cgroup for task" error="cgroups: cgroup deleted" id={digest}',
    ),
    (
        200,
        "containerd info",
        '"ImageCreate event name:\\"sha256:{digest}\\" labels:{{key:\\"io.cri-containerd.image\\" '
        'value:\\"managed\\"}}"',
    ),
    (
        180,
        "containerd info",
        '"PullImage \\"nvcr.io/nvidia/k8s-device-plugin:v0.17.0\\" returns image reference '
        '\\"sha256:{digest}\\""',
    ),
    # canonical/cloud-init@22.2.2 cloudinit/url_helper.py (readurl), cloudinit/subp.py
    (
        40,
        "cloud-init",
        "url_helper.py[DEBUG]: Read from http://169.254.169.254/latest/meta-data/instance-id "
        "(200, 19b) after 1 attempts",
    ),
    (
        20,
        "cloud-init",
        "url_helper.py[DEBUG]: [0/1] open 'http://169.254.169.254/latest/api/token' with {{'url': "
        "'http://169.254.169.254/latest/api/token', 'allow_redirects': True, 'method': 'PUT', "
        "'timeout': 5.0, 'headers': {{'X-aws-ec2-metadata-token-ttl-seconds': 'REDACTED', "
        "'User-Agent': 'Cloud-Init/22.2.2'}}}} configuration",
    ),
    (
        20,
        "cloud-init",
        "subp.py[DEBUG]: Running command ['ssh-keygen', '-t', 'rsa', '-N', '', '-f', "
        "'/etc/ssh/ssh_host_rsa_key'] with allowed return codes [0] (shell=False, capture=True)",
    ),
    (
        20,
        "cloud-init",
        "handlers.py[DEBUG]: finish: modules-final: SUCCESS: running modules for final",
    ),
    # a credential in 2 lines in 10,000: a client at -v=8 logs a request's headers
    # (kubernetes/client-go@v0.32.0 transport/round_trippers.go), and sudo logs a command line
    # with a password on it (sudo-project/sudo@SUDO_1_9_15 plugins/sudoers/logging.c)
    (
        1,
        "klog I",
        "round_trippers.go:473]     Authorization: Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6Im{token}"
        ".eyJpc3MiOiJrdWJlcm5ldGVz{token}.{token}",
    ),
    (
        1,
        "journal",
        "sudo[{pid}]: ec2-user : TTY=pts/0 ; PWD=/home/ec2-user ; USER=root ; COMMAND=/usr/bin/"
        "docker login -u AWS -p {token} 602401143452.dkr.ecr.us-west-2.amazonaws.com",
    ),
)


def journal(megabytes: float, seed: int = 7) -> str:
    """About `megabytes` MiB of journal lines in the mix of `SHAPES`."""
    rng = random.Random(seed)
    hexdigits = "0123456789abcdef"
    alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    lower = "abcdefghijklmnopqrstuvwxyz0123456789"
    pods = [f"llm-inference-7d9f8b6c5d-{''.join(rng.choices(lower, k=5))}" for _ in range(64)]
    uids = [
        "-".join("".join(rng.choices(hexdigits, k=n)) for n in (8, 4, 4, 4, 12)) for _ in range(64)
    ]
    weights = [weight for weight, _, _ in SHAPES]
    target = int(megabytes * 2**20)
    out: list[str] = []
    size = 0
    n = 0
    while size < target:
        n += 1
        s = n // 40
        clock = f"{3 + s // 3600 % 20:02d}:{(s // 60) % 60:02d}:{s % 60:02d}"
        us = n % 1_000_000
        fields = {
            "ns": "inference",
            "pod": pods[n % 64],
            "uid": uids[n % 64],
            "short": pods[(n * 7) % 64][-5:],
            "digest": "".join(rng.choices(hexdigits, k=64)),
            "a": n % 200,
            "b": n % 250,
            "pid": 4000 + n % 1000,
            "token": "".join(rng.choices(alnum, k=40)),
        }
        ((_, how, shape),) = rng.choices(SHAPES, weights)
        body = shape.format(**fields)
        if how.startswith("klog"):
            body = KLOG.format(sev=how[-1], clock=clock, us=us, body=body)
        elif how.startswith("containerd"):
            body = CONTAINERD.format(clock=clock, us=us, level=how.split()[1], body=body)
        if how == "cloud-init":
            line = CLOUD_INIT.format(clock=clock, ms=us // 1000, body=body)
        else:
            line = JOURNAL.format(clock=clock, us=us, body=body)
        out.append(line + "\n")
        size += len(line) + 1
    return "".join(out)


def slow_lines(text: str) -> tuple[int, list[tuple[str, int]]]:
    """How many lines hold a trigger word (each such line, with the lines around it, has its
    views built and every rule tried on them: the slow path), and the words that put the
    most lines there."""
    per_word: Counter[str] = Counter()
    held = 0
    for line, lowered in zip(text.splitlines(), text.lower().splitlines(), strict=True):
        words = [word for word in TRIGGERS if word in lowered and _shaped(line, lowered, word)]
        held += bool(words)
        per_word.update(words)
    return held, per_word.most_common(6)


def _shaped(line: str, lowered: str, word: str) -> bool:
    """Whether `word` counts in `line` (some occurrence has the shape its rule needs)."""
    shape = TRIGGER_SHAPES.get(word)
    if shape is None:
        return True
    at = lowered.find(word)
    while at != -1:
        if shape.match(line, at):
            return True
        at = lowered.find(word, at + 1)
    return False


def cpu_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def measure(mask: Callable[[], bytes], rounds: int) -> tuple[float, bytes]:
    best = float("inf")
    out = b""
    for _ in range(rounds):
        started = cpu_seconds()
        out = mask()
        best = min(best, cpu_seconds() - started)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=70.0, help="MiB of journal text")
    parser.add_argument("--rounds", type=int, default=1, help="best of this many, each path")
    args = parser.parse_args()
    keep_large_blocks()  # the allocator as in collect's pack workers, where masking runs
    data = journal(args.mb).encode()
    mb = len(data) / 2**20
    lines = data.count(b"\n")

    def engine() -> bytes:
        return mask_secrets("journal/kubelet.log", data)[0]

    def python_re() -> bytes:
        with scanner.engine_disabled():
            return mask_secrets("journal/kubelet.log", data)[0]

    print(f"{mb:.1f} MiB of journal text, {lines:,} lines; engine: {scanner.engine_name()}")
    fast, fast_out = measure(engine, args.rounds)
    slow, slow_out = measure(python_re, args.rounds)
    if fast_out != slow_out:
        raise SystemExit("the engine and Python re masked the journal differently")
    masked = fast_out.count(b"***REDACTED***")
    print(f"{masked} secrets masked, the same bytes on both paths")
    print(f"redactor with {scanner.engine_name()}: {fast:.2f} CPU-s, {mb / fast:.0f} MB/s per core")
    print(f"without the engine: {slow:.2f} CPU-s, {mb / slow:.0f} MB/s per core")
    held, words = slow_lines(data.decode())
    print(
        f"{held:,} lines ({held / lines:.0%}) hold a trigger word and have their views read: "
        + ", ".join(f"{word!r} {n:,}" for word, n in words)
    )
    figure(
        "redaction of journal text, per core",
        mb / fast,
        "MB/s",
        target=300,
        higher_is_better=True,
        peer="without the engine (Python re, str.find, grep)",
        peer_value=mb / slow,
    )


if __name__ == "__main__":
    main()
