"""Host.interfaces(): the network interfaces of the host's namespace, one reading per kind of host
(live, --root, bundle), behind the Host like every other fact; checks/ only asks."""

from __future__ import annotations

import json

from rdmadoctor.host import mem_host, net, open_host


def _sysfs(name: str, oper: str = "up", mtu: int = 1500, speed: str = "25000") -> dict[str, str]:
    d = f"/sys/class/net/{name}"
    return {f"{d}/operstate": oper + "\n", f"{d}/flags": "0x1003\n", f"{d}/mtu": f"{mtu}\n", f"{d}/speed": speed + "\n"}


def test_a_bundle_gives_what_collect_recorded_with_the_speeds_of_its_sysfs():
    recorded = [{"name": "eth0", "up": True, "mtu": 9000, "addresses": ["10.0.0.7"]}, {"name": "eth1", "up": False, "mtu": 1500, "addresses": []}]
    host = mem_host({"/runtime.json": json.dumps({"interfaces": recorded}), **_sysfs("eth0", speed="25000"), **_sysfs("eth1", speed="-1")})
    interfaces, source = host.interfaces()
    assert source == "recorded by collect"
    assert interfaces == (
        net.NetIf("eth0", True, 9000, ("10.0.0.7",), 25000, False),
        net.NetIf("eth1", False, 1500, (), None, True),  # speed -1: the driver reports none
    )
    assert host.interfaces() is host.interfaces()  # read once: a run sees one moment


def test_a_bundle_without_the_record_falls_back_to_sysfs_then_says_it_has_nothing():
    interfaces, source = mem_host(_sysfs("eth0")).interfaces()
    assert source == "sysfs" and interfaces == (net.NetIf("eth0", True, 1500, None, 25000),)  # no addresses in sysfs
    assert mem_host({}, label="b.tar.gz").interfaces() == (None, "no /sys/class/net in b.tar.gz")


def test_a_live_host_reads_its_namespace_and_keeps_it_for_collect():
    host = open_host()
    interfaces, source = host.interfaces()
    assert source in ("psutil", "netlink")
    names = [i.name for i in interfaces]
    assert "lo" in names
    # What `collect` writes to runtime.json, read back as a bundle would.
    assert tuple(net.NetIf.from_json(d) for d in host.runtime.interfaces) == tuple(
        net.NetIf(i.name, i.up, i.mtu, i.addresses) for i in interfaces)


def test_a_mounted_root_with_this_namespace_reads_it_and_one_without_reads_its_sysfs(tmp_path):
    live, _ = open_host().interfaces()
    same = tmp_path / "same"
    for i in live:
        d = same / "sys/class/net" / i.name
        d.mkdir(parents=True)
        (d / "operstate").write_text("up\n")
    interfaces, source = open_host(root=str(same)).interfaces()
    assert source in ("psutil", "netlink") and [i.name for i in interfaces] == [i.name for i in live]
    other = tmp_path / "other"
    (other / "sys/class/net/ens9f0").mkdir(parents=True)
    (other / "sys/class/net/ens9f0/operstate").write_text("up\n")
    interfaces, source = open_host(root=str(other)).interfaces()
    assert [i.name for i in interfaces] == ["ens9f0"] and source == f"sysfs of {other} (this process's network namespace differs from the host's)"


def test_checks_read_a_netdev_speed_as_the_host_does():
    from rdmadoctor.checks import _rdma

    assert _rdma.netdev_speed_mbps is net.speed_mbps and _rdma.NET_CLASS == net.NET_CLASS
