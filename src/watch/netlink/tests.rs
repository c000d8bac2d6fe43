use std::os::fd::AsFd as _;
use std::os::unix::net::{UnixDatagram, UnixStream};

use proptest::prelude::*;

use super::*;

/// Packets received from this machine's kernel (a synthetic `change` on
/// /dev/null's uevent file, `add` on lo, `bind` on a PCI host bridge,
/// `change` on /dev/net/tun), byte for byte.
const REAL: &[&[u8]] = &[
    b"change@/devices/virtual/mem/null\x00ACTION=change\x00DEVPATH=/devices/virtual/mem/null\x00SUBSYSTEM=mem\x00SYNTH_UUID=0\x00MAJOR=1\x00MINOR=3\x00DEVNAME=null\x00DEVMODE=0666\x00SEQNUM=821\x00",
    b"add@/devices/virtual/net/lo\x00ACTION=add\x00DEVPATH=/devices/virtual/net/lo\x00SUBSYSTEM=net\x00SYNTH_UUID=0\x00INTERFACE=lo\x00IFINDEX=1\x00SEQNUM=822\x00",
    b"bind@/devices/pci0000:00/0000:00:00.0\x00ACTION=bind\x00DEVPATH=/devices/pci0000:00/0000:00:00.0\x00SUBSYSTEM=pci\x00SYNTH_UUID=0\x00PCI_CLASS=60000\x00PCI_ID=8086:0D57\x00PCI_SUBSYS_ID=0000:0000\x00PCI_SLOT_NAME=0000:00:00.0\x00MODALIAS=pci:v00008086d00000D57sv00000000sd00000000bc06sc00i00\x00SEQNUM=823\x00",
    b"change@/devices/virtual/misc/tun\x00ACTION=change\x00DEVPATH=/devices/virtual/misc/tun\x00SUBSYSTEM=misc\x00SYNTH_UUID=0\x00MAJOR=10\x00MINOR=200\x00DEVNAME=net/tun\x00SEQNUM=824\x00",
];

fn ev(action: &str, subsystem: &str, devpath: &str) -> DeviceEvent {
    DeviceEvent {
        action: action.into(),
        subsystem: subsystem.into(),
        devpath: devpath.into(),
    }
}

#[test]
fn parses_real_kernel_packets() {
    let got: Vec<DeviceEvent> = REAL.iter().map(|p| parse(p).unwrap()).collect();
    assert_eq!(
        got,
        [
            ev("change", "mem", "/devices/virtual/mem/null"),
            ev("add", "net", "/devices/virtual/net/lo"),
            ev("bind", "pci", "/devices/pci0000:00/0000:00:00.0"),
            ev("change", "misc", "/devices/virtual/misc/tun"),
        ]
    );
}

#[test]
fn rejects_packets_missing_keys_or_with_unknown_actions() {
    let cases: &[(&[u8], &str)] = &[
        (b"", "action not found"),
        (
            b"add@/x\0DEVPATH=/x\0SUBSYSTEM=drm\0SEQNUM=1",
            "action not found",
        ),
        (
            b"add@/x\0ACTION=add\0SUBSYSTEM=drm\0SEQNUM=1",
            "devpath not found",
        ),
        (
            b"add@/x\0ACTION=add\0DEVPATH=/x\0SEQNUM=1",
            "subsystem not found",
        ),
        (
            b"add@/x\0ACTION=add\0DEVPATH=/x\0SUBSYSTEM=drm",
            "seq missing",
        ),
        (
            b"frob@/x\0ACTION=frob\0DEVPATH=/x\0SUBSYSTEM=drm\0SEQNUM=1",
            "Unexpected action: frob",
        ),
        (b"add@/x\0ACTION=add\0\xff\xfe", "Packet not UTF-8"),
        // udevd's re-broadcast format is not the kernel's.
        (b"libudev\0\xfe\xed\xca\xfe", "Packet not UTF-8"),
    ];
    for (packet, want) in cases {
        assert_eq!(parse(packet).err().as_deref(), Some(*want), "{packet:?}");
    }
}

proptest! {
    #[test]
    fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse(&bytes);
    }

    #[test]
    fn never_panics_on_key_value_soup(
        fields in proptest::collection::vec(
            ("(ACTION|DEVPATH|SUBSYSTEM|SEQNUM|X)", "[ -~]{0,20}"), 0..8)
    ) {
        let packet: Vec<u8> = fields
            .iter()
            .flat_map(|(k, v)| format!("{k}={v}\0").into_bytes())
            .collect();
        let _ = parse(&packet);
    }

    #[test]
    fn reads_back_what_a_kernel_packet_says(
        action in "(add|remove|change|move|online|offline|bind|unbind)",
        subsystem in "[a-z][a-z0-9_-]{0,15}",
        devpath in "(/[A-Za-z0-9:._-]{1,12}){1,6}",
        seq in any::<u64>(),
        extra in proptest::collection::vec(("[A-Z_]{1,10}", "[ -~]{0,30}"), 0..5),
    ) {
        let mut packet = format!("{action}@{devpath}\0ACTION={action}\0DEVPATH={devpath}\0SUBSYSTEM={subsystem}\0");
        for (k, v) in &extra {
            if !matches!(k.as_str(), "ACTION" | "DEVPATH" | "SUBSYSTEM" | "SEQNUM") {
                packet.push_str(&format!("{k}={v}\0"));
            }
        }
        packet.push_str(&format!("SEQNUM={seq}\0"));
        prop_assert_eq!(parse(packet.as_bytes()), Ok(ev(&action, &subsystem, &devpath)));
    }
}

/// A [`Netlink`] source over a datagram socket pair: (sender, source, wake
/// sender, wake receiver).
fn over_socketpair() -> (UnixDatagram, Netlink, UnixStream, UnixStream) {
    let (tx, rx) = UnixDatagram::pair().unwrap();
    let (wake_tx, wake_rx) = UnixStream::pair().unwrap();
    (tx, Netlink::from_fd(rx.into()), wake_tx, wake_rx)
}

#[test]
fn skips_garbage_and_oversized_packets_and_returns_the_next_event() {
    let (tx, mut source, _wake_tx, wake_rx) = over_socketpair();
    tx.send(b"not a uevent").unwrap();
    tx.send(&vec![b'A'; MAX_PACKET + 100]).unwrap();
    tx.send(REAL.get(1).unwrap()).unwrap();
    let got = source
        .next(Duration::from_secs(5), wake_rx.as_fd())
        .unwrap();
    assert_eq!(
        got,
        Some(Event::Device(ev("add", "net", "/devices/virtual/net/lo")))
    );
    // Nothing more: the timeout passes.
    let got = source
        .next(Duration::from_millis(20), wake_rx.as_fd())
        .unwrap();
    assert_eq!(got, None);
}

#[test]
fn returns_early_when_woken() {
    use std::io::Write as _;
    let (_tx, mut source, mut wake_tx, wake_rx) = over_socketpair();
    wake_tx.write_all(b"x").unwrap();
    let t = Instant::now();
    let got = source
        .next(Duration::from_secs(60), wake_rx.as_fd())
        .unwrap();
    assert_eq!(got, None);
    assert!(t.elapsed() < Duration::from_secs(5));
}

/// Real delivery from this kernel: needs root (to write a uevent file) and
/// netlink; it makes the kernel send a synthetic `change` event for
/// /dev/null, which udev rules on the machine will also see.
#[test]
#[ignore = "root only: triggers a synthetic uevent on /sys/class/mem/null"]
fn receives_a_real_kernel_event() {
    let mut source = Netlink::open().unwrap();
    let (_wake_tx, wake_rx) = UnixStream::pair().unwrap();
    std::fs::write("/sys/class/mem/null/uevent", "change").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Some(Event::Device(e)) = source
            .next(Duration::from_secs(1), wake_rx.as_fd())
            .unwrap()
            && e.devpath == "/devices/virtual/mem/null"
        {
            assert_eq!(e, ev("change", "mem", "/devices/virtual/mem/null"));
            return;
        }
    }
    panic!("no event for /dev/null within 5 s");
}
