//! `cdigen dra-driver`: `--print-slices` (the host read once, the slices
//! printed) or the driver itself ([`crate::dra`]).

use std::io::Write;

use super::DraDriverArgs;

pub(crate) fn run(args: &DraDriverArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    if args.print_slices {
        print_slices(args, out)
    } else {
        serve(args)
    }
}

/// `--print-slices`.
fn print_slices(args: &DraDriverArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let _ = (args, out);
    anyhow::bail!("cdigen dra-driver --print-slices: not built yet")
}

/// The driver.
fn serve(args: &DraDriverArgs) -> anyhow::Result<u8> {
    let _ = args;
    anyhow::bail!("cdigen dra-driver: not built yet")
}
