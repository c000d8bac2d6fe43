//! Kernel uevent packets as `cdigen watch --source netlink` receives them
//! (`add@/devices/...\0ACTION=add\0DEVPATH=...\0...`):
//! `cdigen::watch::netlink::parse`.
//!
//! Asserts: a bad packet is an error with a message, never a panic; a good
//! one has a known action, and the packet rebuilt from the event parses to
//! the same event.
#![no_main]

use libfuzzer_sys::fuzz_target;

const ACTIONS: [&str; 8] = [
    "add", "remove", "change", "move", "online", "offline", "bind", "unbind",
];

fuzz_target!(|data: &[u8]| {
    let event = match cdigen::watch::netlink::parse(data) {
        Ok(event) => event,
        Err(message) => {
            assert!(!message.is_empty());
            return;
        }
    };
    assert!(ACTIONS.contains(&event.action.as_str()), "{event:?}");
    let packet = format!(
        "{a}@{p}\0ACTION={a}\0DEVPATH={p}\0SUBSYSTEM={s}\0SEQNUM=1\0",
        a = event.action,
        p = event.devpath,
        s = event.subsystem
    );
    assert_eq!(
        cdigen::watch::netlink::parse(packet.as_bytes()).as_ref(),
        Ok(&event)
    );
});
