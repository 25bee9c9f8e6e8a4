"""Host facts: meminfo, df, uname -r and the vLLM version, including what they refuse."""

from __future__ import annotations

import pytest

from runners.adapters import AdapterError, detect, parse
from runners.adapters.host_facts import (
    parse_df,
    parse_meminfo,
    parse_rocm_version,
    parse_uname,
    parse_vllm_version,
)

DF_WRAPPED = """\
Filesystem                                          1B-blocks       Used  Available Use% Mounted on
/dev/mapper/very--long--volume--group-root--logical--volume
                                                 105089261568 40123420672 60549885952  40% /
overlay                                         -          -          -    - /var/lib/docker/m
"""


@pytest.mark.parametrize(
    ("output", "version", "release"),
    [
        ("0.11.1\n", "0.11.1", [0, 11, 1]),
        ("0.25.1+cu128\n", "0.25.1+cu128", [0, 25, 1]),
        ("0.11.1rc3.dev12+gabc123\n", "0.11.1rc3.dev12+gabc123", [0, 11, 1]),
        # vllm logs to stdout before it prints the version
        (
            "INFO 11-30 10:00:01 [__init__.py:216] Automatically detected platform cuda.\n0.20.1\n",
            "0.20.1",
            [0, 20, 1],
        ),
    ],
)
def test_the_vllm_version_is_the_last_version_line_of_the_output(output, version, release):
    result = parse(output, tool="vllm-version")
    assert (result["version"], result["release"]) == (version, release)


def test_a_missing_vllm_module_is_reported_as_not_installed():
    output = (
        'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
        "ModuleNotFoundError: No module named 'vllm'\n"
    )
    assert detect(output) == "vllm-version"
    with pytest.raises(AdapterError, match="vLLM is not installed"):
        parse_vllm_version(output)


def test_output_without_a_version_line_is_refused():
    with pytest.raises(AdapterError, match="no version line"):
        parse_vllm_version("usage: vllm [-h] [-v] {chat,complete,serve,bench}\n")


def test_a_lone_kernel_release_and_a_lone_vllm_release_are_told_apart():
    assert detect("6.1.0-28-amd64\n") == "uname"
    assert detect("5.14.0-427.el9.x86_64\n") == "uname"
    assert detect("0.11.1\n") == "vllm-version"


@pytest.mark.parametrize(
    ("output", "version", "release"),
    [
        ("6.3.1-48\n", "6.3.1-48", [6, 3, 1]),  # cat /opt/rocm/.info/version
        (
            "AMDSMI Tool: 24.7.1 | AMDSMI Library version: 24.7.1.0 | ROCm version: 6.3.1\n",
            "6.3.1",
            [6, 3, 1],
        ),  # amd-smi version
    ],
)
def test_the_rocm_version_comes_from_the_info_file_or_amd_smi(output, version, release):
    assert detect(output) == "rocm-version"
    assert parse_rocm_version(output) == {
        "tool": "rocm-version",
        "version": version,
        "release": release,
    }


def test_text_without_a_rocm_version_is_refused():
    with pytest.raises(AdapterError, match="no ROCm version"):
        parse_rocm_version("cat: /opt/rocm/.info/version: No such file or directory\n")


def test_uname_a_is_refused_because_only_the_release_is_read():
    with pytest.raises(AdapterError, match="expected the one word `uname -r` prints"):
        parse_uname("Linux gpu01 6.1.0-28-amd64 #1 SMP Debian 6.1.119-1 x86_64 GNU/Linux\n")


def test_df_joins_a_wrapped_device_name_and_reads_dashes_as_unknown():
    mounts = parse_df(DF_WRAPPED)["mounts"]
    assert mounts[0]["filesystem"] == "/dev/mapper/very--long--volume--group-root--logical--volume"
    assert (mounts[0]["mount"], mounts[0]["available_bytes"]) == ("/", 60549885952)
    assert mounts[1]["size_bytes"] is None


def test_df_in_kibibyte_blocks_is_converted_to_bytes():
    text = "Filesystem 1K-blocks Used Available Use% Mounted on\n/dev/sda1 1000 400 600 40% /data\n"
    mount = parse_df(text)["mounts"][0]
    assert (mount["size_bytes"], mount["used_bytes"]) == (1024000, 409600)


def test_df_mount_points_with_spaces_are_kept_whole():
    header = "Filesystem 1B-blocks Used Available Use% Mounted on\n"
    text = header + "//nas/share 100 50 50 50% /mnt/My Share\n"
    assert parse_df(text)["mounts"][0]["mount"] == "/mnt/My Share"


def test_human_readable_df_is_refused_with_the_flag_to_use():
    text = (
        "Filesystem      Size  Used Avail Use% Mounted on\n/dev/sda1       98G   38G   57G  40% /\n"
    )
    with pytest.raises(AdapterError, match=r"run `df -B1`"):
        parse_df(text)


def test_meminfo_without_memavailable_reports_it_as_unknown():
    result = parse_meminfo("MemTotal:       16318480 kB\nMemFree:         1234567 kB\n")
    assert (result["mem_total_bytes"], result["mem_available_bytes"]) == (16318480 * 1024, None)


def test_meminfo_with_a_garbled_line_is_refused_naming_the_line():
    with pytest.raises(AdapterError, match="line 2 is not `Name: value"):
        parse_meminfo("MemTotal:       16318480 kB\nMemFree: lots\n")


def test_meminfo_without_memtotal_is_refused():
    with pytest.raises(AdapterError, match="no MemTotal line"):
        parse_meminfo("MemFree:         1234567 kB\n")
