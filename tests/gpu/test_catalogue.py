"""The MIG catalogue: NVIDIA's default mig-parted configs as shipped, where they came from,
that they agree with the GPU model table, and the script that writes them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mignurse.gpu import catalogue as cat
from mignurse.gpu.models import MODELS, by_device_id, model_named, parse_device_id
from mignurse.gpu.profiles import MODEL_UNKNOWN, expected_layout, standard_layouts

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "sync-mig-catalogue.py"
SHIPPED = REPO / "mignurse" / "gpu" / cat.CATALOGUE_FILE
FIXTURE = REPO / "tests" / "corpus" / "mig-parted" / "config-default-shape.yaml"
UPSTREAM_FILE_ENV = "MIGNURSE_MIG_PARTED_CONFIG"  # a copy of config-default.yaml at the tag
UPSTREAM_GIT_ENV = "MIGNURSE_MIG_PARTED_GIT"  # a clone (or bare mirror) of NVIDIA/mig-parted
MIG_MODELS = [m for m in MODELS if m.mig_capable and m.profiles]


# -- where it came from ------------------------------------------------------------------------


def test_the_shipped_catalogue_names_the_upstream_file_it_was_read_from() -> None:
    source = cat.catalogue().source
    assert source.repo == "NVIDIA/mig-parted"
    assert source.path == "deployments/systemd/config-default.yaml"
    assert source.tag == "v0.15.0"
    assert source.commit == "e2d5ad1fc72b9d298ea6d04b885cf2d7dbe56941"
    assert source.blob == "85d51174763f1de8b35695909a725534db481984"


def test_the_shipped_file_is_exactly_what_the_script_renders() -> None:
    document = json.loads(SHIPPED.read_text())
    assert SHIPPED.read_text() == cat.render(document)
    assert list(document) == ["source", "configs"]


def _upstream() -> tuple[bytes, str | None] | None:
    """The upstream file's bytes and the tag's commit (when read from git), or None."""
    path = os.environ.get(UPSTREAM_FILE_ENV)
    if path:
        return Path(path).read_bytes(), None
    git_dir = os.environ.get(UPSTREAM_GIT_ENV)
    if git_dir:
        source = cat.catalogue().source
        git = ["git", "--git-dir", git_dir]
        data = subprocess.run(
            [*git, "show", f"{source.tag}:{source.path}"], capture_output=True, check=True
        ).stdout
        commit = subprocess.run(
            [*git, "rev-parse", f"{source.tag}^{{commit}}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return data, commit
    return None


def test_the_shipped_catalogue_equals_the_upstream_file() -> None:
    upstream = _upstream()
    if upstream is None:
        pytest.skip(f"set {UPSTREAM_FILE_ENV}=config-default.yaml or {UPSTREAM_GIT_ENV}=<clone>")
    data, commit = upstream
    source = cat.catalogue().source
    rebuilt = cat.build_document(
        data, repo=source.repo, path=source.path, tag=source.tag, commit=source.commit
    )
    assert rebuilt == json.loads(SHIPPED.read_text())  # configs and blob sha
    if commit is not None:
        assert commit == source.commit


# -- what is in it -----------------------------------------------------------------------------


def test_every_config_of_the_default_file_is_there_media_and_graphics_ones_too() -> None:
    configs = cat.catalogue().configs
    assert len(configs) == 81
    for name in (
        "all-disabled", "all-enabled", "all-balanced", "all-1g.10gb.me", "all-1g.5gb.me",
        "all-2g.12gb.me", "all-1g.24gb.gfx", "all-1g.24gb.me.all", "all-1g.24gb-me",
        "all-2g.48gb.gfx", "all-2g.48gb.me.all", "all-2g.48gb-me", "all-4g.96gb.gfx",
        "all-1g.34gb.me", "all-1g.35gb.me", "all-7g.278gb",
    ):  # fmt: skip
        assert name in configs, name
    assert all(name.startswith("all-") for name in configs)


def test_every_device_id_in_a_filter_is_a_gpu_of_the_model_table() -> None:
    ids = {f for items in cat.catalogue().configs.values() for i in items for f in i.device_filter}
    unknown = [f for f in ids if (n := parse_device_id(f)) is None or by_device_id(n) is None]
    assert unknown == []


def test_each_gpu_is_named_by_at_most_one_item_of_a_config_and_all_its_ids_together() -> None:
    for name, items in cat.catalogue().configs.items():
        for model in MODELS:
            for device_id in model.filter_ids:
                hits = [i for i in items if i.device_filter and i.covers((device_id,))]
                assert len(hits) <= 1, (name, model.name)
            per_id = {
                tuple(i.device_filter)
                for d in model.filter_ids
                for i in items
                if i.device_filter and i.covers((d,))
            }
            assert len(per_id) <= 1, f"{name}: {model.name}'s ids are split across items"


def test_every_layout_fits_the_gpu_it_is_for() -> None:
    for name, items in cat.catalogue().configs.items():
        for item in items:
            models = [m for m in MIG_MODELS if item.device_filter and item.covers(m.filter_ids)]
            if not item.device_filter:  # any GPU: those that have the profiles
                models = [m for m in MIG_MODELS if set(item.mig_devices) <= set(m.profiles)]
            for model in models:
                for profile, count in item.mig_devices.items():
                    assert profile in model.profiles, (name, model.name, profile)
                    assert count <= model.profiles[profile], (name, model.name, profile)


def test_a_one_profile_config_for_any_gpu_fills_each_gpu_that_has_the_profile() -> None:
    # The default file's all-<profile> counts are the guide's most-per-GPU: a check on ours.
    for name, items in cat.catalogue().configs.items():
        if len(items) != 1 or items[0].device_filter or len(items[0].mig_devices) != 1:
            continue
        ((profile, count),) = items[0].mig_devices.items()
        for model in MIG_MODELS:
            if profile in model.profiles:
                assert model.profiles[profile] == count, (name, model.name)


def test_every_profile_of_the_model_table_is_one_the_default_file_uses() -> None:
    used = {p for items in cat.catalogue().configs.values() for i in items for p in i.mig_devices}
    for model in MIG_MODELS:
        assert set(model.profiles) <= used, model.name


def test_configs_no_known_gpu_has_are_few_and_named() -> None:
    orphans = [
        name
        for name in cat.catalogue().configs
        if not any(
            (layout := expected_layout(name, m)) is not None and layout.devices is not None
            for m in MODELS
        )
    ]
    # 95/189 GB parts the file names no device id for: left as "GPU model unknown".
    assert orphans == ["all-3g.95gb", "all-4g.95gb", "all-7g.189gb"]


@pytest.mark.parametrize(
    "model",
    ["A100-40GB", "A100-80GB", "H100-80GB", "H100-NVL", "GH200-96GB", "GH200-144GB",
     "H200-141GB", "H200-NVL", "A30", "B200", "GB200", "B300", "GB300", "RTX-PRO-6000-Server"],
)  # fmt: skip
def test_all_balanced_is_known_for_every_gpu_the_file_balances(model: str) -> None:
    layout = expected_layout("all-balanced", model_named(model))
    assert layout is not None and layout.mig_enabled and layout.devices


# -- one name, the layout of each GPU ----------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "model", "devices"),
    [
        ("all-1g.10gb", "A100-40GB", {"1g.10gb": 4}),
        ("all-1g.10gb", "A100-80GB", {"1g.10gb": 7}),
        ("all-1g.10gb", "H100-80GB", {"1g.10gb": 7}),
        ("all-1g.35gb", "H200-141GB", {"1g.35gb": 4}),
        ("all-1g.35gb", "GB300", {"1g.35gb": 7}),
        ("all-balanced", "GB200", {"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1}),
        ("all-balanced", "B200", {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}),
        ("all-balanced", "GH200-96GB", {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1}),
        ("all-balanced", "H200-141GB", {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}),
        ("all-balanced", "A30", {"1g.6gb": 2, "2g.12gb": 1}),
        ("all-1g.24gb.me.all", "RTX-PRO-6000-Server", {"1g.24gb+me.all": 1}),
        ("all-disabled", "L4", {}),
    ],
)
def test_a_config_means_the_layout_of_the_identified_gpu(
    config: str, model: str, devices: dict[str, int]
) -> None:
    layout = expected_layout(config, model_named(model))
    assert layout is not None and layout.devices == devices


@pytest.mark.parametrize(
    ("config", "model", "says"),
    [
        ("all-1g.10gb", "H200-141GB", "no entry for H200-141GB"),
        ("all-1g.35gb", "H200-NVL", "no entry for H200-NVL"),
        ("all-1g.24gb", "H200-141GB", "H200-141GB has no 1g.24gb profile"),
        ("all-1g.24gb", "L40S", "L40S has no MIG"),
        ("all-balanced", None, MODEL_UNKNOWN),
        ("all-1g.10gb", None, MODEL_UNKNOWN),
        ("all-1g.24gb", None, MODEL_UNKNOWN),
    ],
)
def test_where_the_layout_depends_on_an_unknown_or_wrong_gpu_it_is_unknown(
    config: str, model: str | None, says: str
) -> None:
    layout = expected_layout(config, model_named(model) if model else None)
    assert layout is not None and layout.devices is None and says in layout.note
    # A config for any GPU still says MIG is on; a device-filtered one says nothing.
    assert layout.mig_enabled is (True if config == "all-1g.24gb" and model is None else None)


def test_a_name_outside_the_file_has_no_layout() -> None:
    assert expected_layout("custom-3x2g", model_named("H100-80GB")) is None


def test_standard_layouts_list_what_the_simulator_and_runbooks_may_apply() -> None:
    layouts = standard_layouts(model_named("H100-80GB"))
    assert layouts["all-1g.10gb"] == {"1g.10gb": 7}
    assert layouts["all-1g.10gb.me"] == {"1g.10gb+me": 1}
    assert "all-1g.5gb" not in layouts and "all-disabled" not in layouts


# -- the generator -----------------------------------------------------------------------------

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _sync(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, check=False
    )


def test_the_script_writes_the_catalogue_of_an_upstream_shaped_file(tmp_path: Path) -> None:
    out = tmp_path / "catalogue.json"
    done = _sync("--from", str(FIXTURE), "--tag", "v9.9.9", "--commit", COMMIT, "--out", str(out))
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert document["source"] == {
        "repo": "NVIDIA/mig-parted",
        "path": "deployments/systemd/config-default.yaml",
        "tag": "v9.9.9",
        "commit": COMMIT,
        "blob": cat.git_blob_sha(FIXTURE.read_bytes()),
    }
    configs = document["configs"]
    assert list(configs) == [
        "all-disabled", "all-enabled", "all-1g.5gb", "all-1g.5gb.me", "all-1g.10gb",
        "all-balanced",
    ]  # fmt: skip
    assert configs["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    assert configs["all-1g.10gb"][0]["device-filter"] == ["0x233010DE", "0x20B210DE"]
    assert configs["all-balanced"][0]["device-filter"] == ["0x20B710DE"]  # one id: a list
    assert configs["all-balanced"][1]["device-filter"] == ["0x233010DE:0x16C110DE"]
    assert configs["all-balanced"][1]["devices"] == [0, 1, 2, 3]
    loaded = cat.from_document(document)
    a100_40 = model_named("A100-40GB").filter_ids
    assert [i.mig_devices for i in loaded.configs["all-1g.10gb"] if i.covers(a100_40)] == [
        {"1g.10gb": 4}
    ]
    assert _sync("--from", str(FIXTURE), "--tag", "v9.9.9", "--commit", COMMIT, "--out",
                 str(out), "--check").returncode == 0  # fmt: skip
    out.write_text(out.read_text().replace('"1g.10gb": 4', '"1g.10gb": 5'))
    changed = _sync("--from", str(FIXTURE), "--tag", "v9.9.9", "--commit", COMMIT, "--out",
                    str(out), "--check")  # fmt: skip
    assert changed.returncode == 1 and "differs" in changed.stderr


def test_crlf_line_ends_read_the_same_but_hash_as_their_own_bytes() -> None:
    text = FIXTURE.read_text()
    crlf = text.replace("\n", "\r\n").encode()
    plain = cat.build_document(text.encode(), repo="r", path="p", tag="t", commit=COMMIT)
    windows = cat.build_document(crlf, repo="r", path="p", tag="t", commit=COMMIT)
    assert windows["configs"] == plain["configs"]
    assert windows["source"]["blob"] != plain["source"]["blob"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("version: v2\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n",
         "unknown version 'v2'"),
        ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\nhooks: {}\n",
         "unexpected field 'hooks'"),
        ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, device: 0}]}\n",
         "unexpected field 'device'"),
        ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true}]}\n",
         "mig-devices is required"),
        ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, "
         "mig-devices: {1g.5gb: 1}}]}\n", "must be empty"),
        ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, "
         "device-filter: '0x2330', mig-devices: {}}]}\n", "not a 0xDDDDVVVV id"),
        ("version: v1\nmig-configs: {a: []}\n", "non-empty list"),
        ("version: v1\nmig-configs: {a: [{devices: [-1], mig-enabled: false}]}\n",
         "GPU indices"),
        ("version: v1\nmig-configs: [\n", "not YAML"),
        ("\x00\x01", "not YAML"),
    ],
)  # fmt: skip
def test_a_file_mig_parted_would_refuse_is_refused_in_one_line(
    tmp_path: Path, text: str, says: str
) -> None:
    bad = tmp_path / "config.yaml"
    bad.write_text(text)
    out = tmp_path / "out.json"
    done = _sync("--from", str(bad), "--tag", "v0", "--commit", COMMIT, "--out", str(out))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
    assert not out.exists()


def test_a_commit_that_is_not_one_is_refused(tmp_path: Path) -> None:
    done = _sync("--from", str(FIXTURE), "--tag", "v0", "--commit", "bd7160f",
                 "--out", str(tmp_path / "o.json"))  # fmt: skip
    assert done.returncode == 2 and "40-hex" in done.stderr
