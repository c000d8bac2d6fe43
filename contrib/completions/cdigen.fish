# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_cdigen_global_optspecs
    string join \n v/verbose q/quiet h/help V/version
end

function __fish_cdigen_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_cdigen_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_cdigen_using_subcommand
    set -l cmd (__fish_cdigen_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c cdigen -n "__fish_cdigen_needs_command" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_needs_command" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_needs_command" -s V -l version -d 'Print version'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "generate" -d 'Discover devices and write CDI specs and device-info files'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "discover" -d 'Discover devices and print what was found, without writing anything'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "list" -d 'List the fully-qualified CDI device names (vendor/class=name) in the spec directories'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "validate" -d 'Validate CDI spec files and directories by the rules runtimes apply'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "check" -d 'Check that the specs and device-info files on disk are what generate would write now'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "inject" -d 'Show what a container gets when a runtime injects CDI devices, and what goes wrong'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "snapshot" -d 'Record what cdigen reads from this host into a fixture tree, for bug reports and tests'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "plugin" -d 'Act as a CDI plugin of the 2017 draft: allocate devices to request IDs'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "watch" -d 'Keep CDI specs and device-info files current while devices come and go'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "device-plugin" -d 'Serve the devices to the kubelet: a device plugin per resource (API v1beta1, with CDI devices)'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "dra-driver" -d 'Serve the devices through Dynamic Resource Allocation (resource.k8s.io/v1): publish them as ResourceSlices and prepare the claims the scheduler allocates from them'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "hook" -d 'Run as an OCI createContainer hook of a CDI spec: create-symlinks, enable-cuda-compat, update-ldcache'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "completions" -d 'Print a shell completion script (bash, zsh or fish) to stdout'
complete -c cdigen -n "__fish_cdigen_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l root -d 'Read sysfs, procfs and /dev under this directory instead of / (a fixture or a snapshot)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l backend -d 'Only run this backend (repeatable)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l driver-root -d 'Where the NVIDIA driver\'s user-space files are, as a path on the host (under --root) [default: /run/nvidia/driver when it exists and is not empty (the GPU operator\'s driver container), else /]' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l library-search-path -d 'Another directory to look for the NVIDIA driver\'s libraries in, under --driver-root, after the linker cache and the usual directories (repeatable; colon-separated in the environment variable)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l hook-path -d 'Where container runtimes find the hook program on the host, for the `cdigen hook` steps NVIDIA specs ask them to run: the static cdigen-hook (no LD_PRELOAD of a container reaches it), or cdigen; an installed, root-owned program, which stays there [default: when this cdigen is installed (in /usr/bin, /usr/local/bin, /opt/cdigen/bin, ...), the cdigen-hook beside it, else this cdigen; run from anywhere else (a build directory, a download), /usr/bin/cdigen-hook, with a warning]. In a container (a DaemonSet), the path of a cdigen-hook installed on the host' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l generators -d 'Directory of generator definitions (*.yaml) that add to or replace the built-in ones [default: /etc/cdigen/generators.d]; skipped when it does not exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l templates -d 'Directory of templates (NAME.json.hbs) that add to or replace the built-in ones [default: /etc/cdigen/templates]; skipped when it does not exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l generator -d 'Only run this generator (repeatable; default: every enabled generator)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l output-dir -d 'Directory to write CDI specs to: /etc/cdi for driver install hooks, /var/run/cdi for regeneration at boot or on hotplug' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l devinfo-dir -d 'Directory for NPWG device-info files of generators that write them' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l spec-dir -d 'A spec directory runtimes read, lowest priority first (repeatable; default: /etc/cdi then /var/run/cdi, under --root): a spec is not written while a file another tool wrote there defines one of its devices' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l output -d 'Write the one selected generator\'s spec to FILE instead (- for stdout); no device-info files are written then' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l format -d 'Spec format, overriding the generators\' (default: each generator\'s, YAML for the built-in ones)' -r -f -a "json\t'JSON'
yaml\t'YAML, every string quoted'"
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l lock-timeout -d 'Give up waiting for the lock of an output directory another cdigen process is writing after DURATION (30s, 5m, ...): generate then fails with exit status 3, a long-running command logs the error and retries later [default: wait as long as it takes]. After 1s of waiting a warning names the lock file and the PID holding it' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l no-nvml -d 'Never load NVIDIA\'s NVML library (loading a library runs its code): procfs and sysfs alone describe NVIDIA GPUs, without MIG UUIDs or the cross-check. Without it, NVML is the system\'s with --root / and --driver-root /, else the driver root\'s libnvidia-ml.so.<version>, loaded only when it and every directory above it are owned by root and writable by root alone'
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l dry-run -d 'Print what would change and write nothing'
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -l diff -d 'With --dry-run, also print a unified diff of each change'
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand generate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand discover" -l root -d 'Read sysfs, procfs and /dev under this directory instead of / (a fixture or a snapshot)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand discover" -l backend -d 'Only run this backend (repeatable)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand discover" -l driver-root -d 'Where the NVIDIA driver\'s user-space files are, as a path on the host (under --root) [default: /run/nvidia/driver when it exists and is not empty (the GPU operator\'s driver container), else /]' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand discover" -l library-search-path -d 'Another directory to look for the NVIDIA driver\'s libraries in, under --driver-root, after the linker cache and the usual directories (repeatable; colon-separated in the environment variable)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand discover" -l hook-path -d 'Where container runtimes find the hook program on the host, for the `cdigen hook` steps NVIDIA specs ask them to run: the static cdigen-hook (no LD_PRELOAD of a container reaches it), or cdigen; an installed, root-owned program, which stays there [default: when this cdigen is installed (in /usr/bin, /usr/local/bin, /opt/cdigen/bin, ...), the cdigen-hook beside it, else this cdigen; run from anywhere else (a build directory, a download), /usr/bin/cdigen-hook, with a warning]. In a container (a DaemonSet), the path of a cdigen-hook installed on the host' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand discover" -l generators -d 'Directory of generator definitions (*.yaml) that add to or replace the built-in ones [default: /etc/cdigen/generators.d, when it exists]: the generic backend scans what their `match` and `join` sections declare' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand discover" -l generator -d 'Scan for this generator\'s devices, enabled or not (repeatable; default: every enabled generator). Only the generic backend depends on the generators' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand discover" -s o -l output-format -d 'Output format' -r -f -a "text\t'Plain text, for people'
json\t'One JSON document'
yaml\t'One YAML document (every string quoted)'"
complete -c cdigen -n "__fish_cdigen_using_subcommand discover" -l no-nvml -d 'Never load NVIDIA\'s NVML library (loading a library runs its code): procfs and sysfs alone describe NVIDIA GPUs, without MIG UUIDs or the cross-check. Without it, NVML is the system\'s with --root / and --driver-root /, else the driver root\'s libnvidia-ml.so.<version>, loaded only when it and every directory above it are owned by root and writable by root alone'
complete -c cdigen -n "__fish_cdigen_using_subcommand discover" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand discover" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand discover" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -l spec-dir -d 'A spec directory to read, lowest priority first (repeatable; default: /etc/cdi then /var/run/cdi)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -l root -d 'Read sysfs, procfs and /dev under this directory instead of / (a fixture or a snapshot)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -l backend -d 'Only run this backend (repeatable)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -l driver-root -d 'Where the NVIDIA driver\'s user-space files are, as a path on the host (under --root) [default: /run/nvidia/driver when it exists and is not empty (the GPU operator\'s driver container), else /]' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -l library-search-path -d 'Another directory to look for the NVIDIA driver\'s libraries in, under --driver-root, after the linker cache and the usual directories (repeatable; colon-separated in the environment variable)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -l hook-path -d 'Where container runtimes find the hook program on the host, for the `cdigen hook` steps NVIDIA specs ask them to run: the static cdigen-hook (no LD_PRELOAD of a container reaches it), or cdigen; an installed, root-owned program, which stays there [default: when this cdigen is installed (in /usr/bin, /usr/local/bin, /opt/cdigen/bin, ...), the cdigen-hook beside it, else this cdigen; run from anywhere else (a build directory, a download), /usr/bin/cdigen-hook, with a warning]. In a container (a DaemonSet), the path of a cdigen-hook installed on the host' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -l generators -d 'Directory of generator definitions (*.yaml) that add to or replace the built-in ones [default: /etc/cdigen/generators.d]; skipped when it does not exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -l templates -d 'Directory of templates (NAME.json.hbs) that add to or replace the built-in ones [default: /etc/cdigen/templates]; skipped when it does not exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -l generator -d 'Only run this generator (repeatable; default: every enabled generator)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -s o -l output-format -d 'Output format: names one per line, or records with the file each comes from' -r -f -a "text\t'Plain text, for people'
json\t'One JSON document'
yaml\t'One YAML document (every string quoted)'"
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -l discovered -d 'List the names `cdigen generate` would write, from the devices discovered now'
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -l no-nvml -d 'Never load NVIDIA\'s NVML library (loading a library runs its code): procfs and sysfs alone describe NVIDIA GPUs, without MIG UUIDs or the cross-check. Without it, NVML is the system\'s with --root / and --driver-root /, else the driver root\'s libnvidia-ml.so.<version>, loaded only when it and every directory above it are owned by root and writable by root alone'
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand validate" -s o -l output-format -d 'Output format' -r -f -a "text\t'One line per finding, then a summary'
json\t'One JSON document with every file\'s findings'"
complete -c cdigen -n "__fish_cdigen_using_subcommand validate" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand validate" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand validate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -l root -d 'Read sysfs, procfs and /dev under this directory instead of / (a fixture or a snapshot)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -l backend -d 'Only run this backend (repeatable)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -l driver-root -d 'Where the NVIDIA driver\'s user-space files are, as a path on the host (under --root) [default: /run/nvidia/driver when it exists and is not empty (the GPU operator\'s driver container), else /]' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -l library-search-path -d 'Another directory to look for the NVIDIA driver\'s libraries in, under --driver-root, after the linker cache and the usual directories (repeatable; colon-separated in the environment variable)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -l hook-path -d 'Where container runtimes find the hook program on the host, for the `cdigen hook` steps NVIDIA specs ask them to run: the static cdigen-hook (no LD_PRELOAD of a container reaches it), or cdigen; an installed, root-owned program, which stays there [default: when this cdigen is installed (in /usr/bin, /usr/local/bin, /opt/cdigen/bin, ...), the cdigen-hook beside it, else this cdigen; run from anywhere else (a build directory, a download), /usr/bin/cdigen-hook, with a warning]. In a container (a DaemonSet), the path of a cdigen-hook installed on the host' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -l generators -d 'Directory of generator definitions (*.yaml) that add to or replace the built-in ones [default: /etc/cdigen/generators.d]; skipped when it does not exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -l templates -d 'Directory of templates (NAME.json.hbs) that add to or replace the built-in ones [default: /etc/cdigen/templates]; skipped when it does not exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -l generator -d 'Only run this generator (repeatable; default: every enabled generator)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -l output-dir -d 'Directory generate writes CDI specs to' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -l devinfo-dir -d 'Directory generate writes NPWG device-info files to' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -l spec-dir -d 'A spec directory runtimes read, lowest priority first, for conflicts, shadowing and other tools\' files (repeatable; default: /etc/cdi then /var/run/cdi, under --root)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -l format -d 'Spec format generate is given with --format, if any' -r -f -a "json\t'JSON'
yaml\t'YAML, every string quoted'"
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -s o -l output-format -d 'Output format' -r -f -a "text\t'Plain text, for people'
json\t'One JSON document'
yaml\t'One YAML document (every string quoted)'"
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -l no-nvml -d 'Never load NVIDIA\'s NVML library (loading a library runs its code): procfs and sysfs alone describe NVIDIA GPUs, without MIG UUIDs or the cross-check. Without it, NVML is the system\'s with --root / and --driver-root /, else the driver root\'s libnvidia-ml.so.<version>, loaded only when it and every directory above it are owned by root and writable by root alone'
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand inject" -l spec-dir -d 'A spec directory to read, lowest priority first (repeatable; default: /etc/cdi then /var/run/cdi)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand inject" -l root -d 'Look at device nodes and mount sources under this directory instead of / (a fixture or a snapshot)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand inject" -s o -l output-format -d 'Output format' -r -f -a "text\t'Plain text, for people'
json\t'One JSON document'
yaml\t'One YAML document (every string quoted)'"
complete -c cdigen -n "__fish_cdigen_using_subcommand inject" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand inject" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand inject" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand snapshot" -l root -d 'Read sysfs, procfs and /dev under this directory instead of /' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand snapshot" -l driver-root -d 'Where the NVIDIA driver\'s user-space files are, as a path on the host (under --root) [default: /run/nvidia/driver when it exists and is not empty (the GPU operator\'s driver container), else /]' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand snapshot" -l output -d 'Directory to create the fixture tree in (must not exist or be empty)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand snapshot" -l generators -d 'Directory of generator definitions (*.yaml) that add to or replace the built-in ones [default: /etc/cdigen/generators.d, when it exists]: the generic backend records what every one of them (enabled or not) scans' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand snapshot" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand snapshot" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand snapshot" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand plugin" -l root -d 'Read sysfs, procfs and /dev under this directory instead of / (a fixture or a snapshot)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand plugin" -l driver-root -d 'Where the NVIDIA driver\'s user-space files are, as a path on the host (under --root) [default: /run/nvidia/driver when it exists and is not empty (the GPU operator\'s driver container), else /]' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand plugin" -l generators -d 'Directory of generator definitions (*.yaml) that add to or replace the built-in ones [default: /etc/cdigen/generators.d]; skipped when it does not exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand plugin" -l state-dir -d 'Directory of the allocations file (allocations.json) and its lock' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand plugin" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand plugin" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand plugin" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l root -d 'Read sysfs, procfs and /dev under this directory instead of / (a fixture or a snapshot)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l backend -d 'Only run this backend (repeatable)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l driver-root -d 'Where the NVIDIA driver\'s user-space files are, as a path on the host (under --root) [default: /run/nvidia/driver when it exists and is not empty (the GPU operator\'s driver container), else /]' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l library-search-path -d 'Another directory to look for the NVIDIA driver\'s libraries in, under --driver-root, after the linker cache and the usual directories (repeatable; colon-separated in the environment variable)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l hook-path -d 'Where container runtimes find the hook program on the host, for the `cdigen hook` steps NVIDIA specs ask them to run: the static cdigen-hook (no LD_PRELOAD of a container reaches it), or cdigen; an installed, root-owned program, which stays there [default: when this cdigen is installed (in /usr/bin, /usr/local/bin, /opt/cdigen/bin, ...), the cdigen-hook beside it, else this cdigen; run from anywhere else (a build directory, a download), /usr/bin/cdigen-hook, with a warning]. In a container (a DaemonSet), the path of a cdigen-hook installed on the host' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l generators -d 'Directory of generator definitions (*.yaml) that add to or replace the built-in ones [default: /etc/cdigen/generators.d]; skipped when it does not exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l templates -d 'Directory of templates (NAME.json.hbs) that add to or replace the built-in ones [default: /etc/cdigen/templates]; skipped when it does not exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l generator -d 'Only run this generator (repeatable; default: every enabled generator)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l output-dir -d 'Directory to write CDI specs to' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l devinfo-dir -d 'Directory for NPWG device-info files of generators that write them' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l spec-dir -d 'A spec directory runtimes read, lowest priority first (repeatable; default: /etc/cdi then /var/run/cdi, under --root): a spec is not written while a file another tool wrote there defines one of its devices' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l format -d 'Spec format, overriding the generators\'' -r -f -a "json\t'JSON'
yaml\t'YAML, every string quoted'"
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l source -d 'Where device events come from' -r -f -a "auto\t'udev when built with it and udevd runs, else netlink, else none'
udev\t'udevd\'s events through libudev (cargo feature `udev`)'
netlink\t'The kernel\'s uevents from a netlink socket'
none\t'No events: the periodic re-check and SIGHUP only'"
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l debounce -d 'Quiet period (500ms, 2s, ...; from 10ms to 1m): an event after this long without events is acted on at once; events that follow within this of each other are regenerated together once they stop (longer only holds back the specs of devices that came in a burst)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l max-delay -d 'Longest wait of an event that follows another, however many follow (from 10ms to 1h: under a steady stream of events, specs lag the host by at most this)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l interval -d 'Regenerate everything this often, events or not (from 1s to 24h: changes that send no event, such as nodes made by nvidia-modprobe, are caught within a day)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l ready-file -d 'Create FILE once the first full generation completed, even if some generators failed; remove it on exit. Its directory must exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l lock-timeout -d 'Give up waiting for the lock of an output directory another cdigen process is writing after DURATION (30s, 5m, ...): generate then fails with exit status 3, a long-running command logs the error and retries later [default: wait as long as it takes]. After 1s of waiting a warning names the lock file and the PID holding it' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -l no-nvml -d 'Never load NVIDIA\'s NVML library (loading a library runs its code): procfs and sysfs alone describe NVIDIA GPUs, without MIG UUIDs or the cross-check. Without it, NVML is the system\'s with --root / and --driver-root /, else the driver root\'s libnvidia-ml.so.<version>, loaded only when it and every directory above it are owned by root and writable by root alone'
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l root -d 'Read sysfs, procfs and /dev under this directory instead of / (a fixture or a snapshot)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l backend -d 'Only run this backend (repeatable)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l driver-root -d 'Where the NVIDIA driver\'s user-space files are, as a path on the host (under --root) [default: /run/nvidia/driver when it exists and is not empty (the GPU operator\'s driver container), else /]' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l library-search-path -d 'Another directory to look for the NVIDIA driver\'s libraries in, under --driver-root, after the linker cache and the usual directories (repeatable; colon-separated in the environment variable)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l hook-path -d 'Where container runtimes find the hook program on the host, for the `cdigen hook` steps NVIDIA specs ask them to run: the static cdigen-hook (no LD_PRELOAD of a container reaches it), or cdigen; an installed, root-owned program, which stays there [default: when this cdigen is installed (in /usr/bin, /usr/local/bin, /opt/cdigen/bin, ...), the cdigen-hook beside it, else this cdigen; run from anywhere else (a build directory, a download), /usr/bin/cdigen-hook, with a warning]. In a container (a DaemonSet), the path of a cdigen-hook installed on the host' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l generators -d 'Directory of generator definitions (*.yaml) that add to or replace the built-in ones [default: /etc/cdigen/generators.d]; skipped when it does not exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l templates -d 'Directory of templates (NAME.json.hbs) that add to or replace the built-in ones [default: /etc/cdigen/templates]; skipped when it does not exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l generator -d 'Only run this generator (repeatable; default: every enabled generator)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l output-dir -d 'Directory to write CDI specs to' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l devinfo-dir -d 'Directory for NPWG device-info files of generators that write them' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l spec-dir -d 'A spec directory runtimes read, lowest priority first (repeatable; default: /etc/cdi then /var/run/cdi, under --root): a spec is not written while a file another tool wrote there defines one of its devices' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l format -d 'Spec format, overriding the generators\'' -r -f -a "json\t'JSON'
yaml\t'YAML, every string quoted'"
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l source -d 'Where device events come from' -r -f -a "auto\t'udev when built with it and udevd runs, else netlink, else none'
udev\t'udevd\'s events through libudev (cargo feature `udev`)'
netlink\t'The kernel\'s uevents from a netlink socket'
none\t'No events: the periodic re-check and SIGHUP only'"
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l debounce -d 'Quiet period (500ms, 2s, ...; from 10ms to 1m): an event after this long without events is acted on at once; events that follow within this of each other are regenerated together once they stop (longer only holds back the specs of devices that came in a burst)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l max-delay -d 'Longest wait of an event that follows another, however many follow (from 10ms to 1h: under a steady stream of events, specs lag the host by at most this)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l interval -d 'Regenerate everything this often, events or not (from 1s to 24h: changes that send no event, such as nodes made by nvidia-modprobe, are caught within a day)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l ready-file -d 'Create FILE once the first full generation completed, even if some generators failed; remove it on exit. Its directory must exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l lock-timeout -d 'Give up waiting for the lock of an output directory another cdigen process is writing after DURATION (30s, 5m, ...): generate then fails with exit status 3, a long-running command logs the error and retries later [default: wait as long as it takes]. After 1s of waiting a warning names the lock file and the PID holding it' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l plugin-dir -d 'The kubelet\'s device plugin directory: where kubelet.sock is and the plugins\' sockets go' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l pod-resources-socket -d 'The kubelet\'s pod resources socket: which allocations are live (for device-info files)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l pod-uid -d 'This pod\'s UID (in a DaemonSet, metadata.uid from the downward API): a rolling update, the new pod serving beside the old one on its own sockets, both sharing the allocations on disk' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l ignore-health -d 'Health codes not acted on, comma-separated, or none: a device with only these problems stays healthy (no taint, Healthy to the kubelet). Codes: DeviceNodeMissing, DeviceNodeMismatch, NotADeviceNode, DeviceNodeUnreadable, NoDriverBound, GoneWhileAllocated, FunctionRemoved, AERFatal, AERNonFatal, LinkWidthDegraded, LinkSpeedDegraded, NvidiaXid<N> (NVIDIA XID N from NVML; NvidiaXid: every XID), NvidiaGpuLost, Unhealthy. The list replaces the default; `default` in it stands for the default\'s codes (the application\'s XIDs among them)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l no-nvml -d 'Never load NVIDIA\'s NVML library (loading a library runs its code): procfs and sysfs alone describe NVIDIA GPUs, without MIG UUIDs or the cross-check. Without it, NVML is the system\'s with --root / and --driver-root /, else the driver root\'s libnvidia-ml.so.<version>, loaded only when it and every directory above it are owned by root and writable by root alone'
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -l legacy-edits -d 'Also answer Allocate with the legacy devices, mounts and envs fields, for runtimes without CDI support (or kubelets before 1.29 that ignore CDI devices). Hooks cannot be expressed so'
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand device-plugin" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l root -d 'Read sysfs, procfs and /dev under this directory instead of / (a fixture or a snapshot)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l backend -d 'Only run this backend (repeatable)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l driver-root -d 'Where the NVIDIA driver\'s user-space files are, as a path on the host (under --root) [default: /run/nvidia/driver when it exists and is not empty (the GPU operator\'s driver container), else /]' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l library-search-path -d 'Another directory to look for the NVIDIA driver\'s libraries in, under --driver-root, after the linker cache and the usual directories (repeatable; colon-separated in the environment variable)' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l hook-path -d 'Where container runtimes find the hook program on the host, for the `cdigen hook` steps NVIDIA specs ask them to run: the static cdigen-hook (no LD_PRELOAD of a container reaches it), or cdigen; an installed, root-owned program, which stays there [default: when this cdigen is installed (in /usr/bin, /usr/local/bin, /opt/cdigen/bin, ...), the cdigen-hook beside it, else this cdigen; run from anywhere else (a build directory, a download), /usr/bin/cdigen-hook, with a warning]. In a container (a DaemonSet), the path of a cdigen-hook installed on the host' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l generators -d 'Directory of generator definitions (*.yaml) that add to or replace the built-in ones [default: /etc/cdigen/generators.d]; skipped when it does not exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l templates -d 'Directory of templates (NAME.json.hbs) that add to or replace the built-in ones [default: /etc/cdigen/templates]; skipped when it does not exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l generator -d 'Only run this generator (repeatable; default: every enabled generator)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l output-dir -d 'Directory to write CDI specs to' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l devinfo-dir -d 'Directory for NPWG device-info files of generators that write them' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l spec-dir -d 'A spec directory runtimes read, lowest priority first (repeatable; default: /etc/cdi then /var/run/cdi, under --root): a spec is not written while a file another tool wrote there defines one of its devices' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l format -d 'Spec format, overriding the generators\'' -r -f -a "json\t'JSON'
yaml\t'YAML, every string quoted'"
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l source -d 'Where device events come from' -r -f -a "auto\t'udev when built with it and udevd runs, else netlink, else none'
udev\t'udevd\'s events through libudev (cargo feature `udev`)'
netlink\t'The kernel\'s uevents from a netlink socket'
none\t'No events: the periodic re-check and SIGHUP only'"
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l debounce -d 'Quiet period (500ms, 2s, ...; from 10ms to 1m): an event after this long without events is acted on at once; events that follow within this of each other are regenerated together once they stop (longer only holds back the specs of devices that came in a burst)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l max-delay -d 'Longest wait of an event that follows another, however many follow (from 10ms to 1h: under a steady stream of events, specs lag the host by at most this)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l interval -d 'Regenerate everything this often, events or not (from 1s to 24h: changes that send no event, such as nodes made by nvidia-modprobe, are caught within a day)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l ready-file -d 'Create FILE once the first full generation completed, even if some generators failed; remove it on exit. Its directory must exist' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l lock-timeout -d 'Give up waiting for the lock of an output directory another cdigen process is writing after DURATION (30s, 5m, ...): generate then fails with exit status 3, a long-running command logs the error and retries later [default: wait as long as it takes]. After 1s of waiting a warning names the lock file and the PID holding it' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l driver-name -d 'The DRA driver name the slices and claims carry (a DNS subdomain)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l node -d 'The node this driver runs on: the slices\' nodeName and pool' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l plugin-dir -d 'The kubelet\'s plugin directory: the DRA socket and the checkpoint go in <DIR>/<driver>/' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l registry-dir -d 'The kubelet\'s plugin registration directory: the registration socket goes here' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l pod-uid -d 'This pod\'s UID (in a DaemonSet, metadata.uid from the downward API): a rolling update, the new pod serving beside the old one on its own sockets, both sharing the checkpoint on disk' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l ignore-health -d 'Health codes not acted on, comma-separated, or none: a device with only these problems stays healthy (no taint, Healthy to the kubelet). Codes: DeviceNodeMissing, DeviceNodeMismatch, NotADeviceNode, DeviceNodeUnreadable, NoDriverBound, GoneWhileAllocated, FunctionRemoved, AERFatal, AERNonFatal, LinkWidthDegraded, LinkSpeedDegraded, NvidiaXid<N> (NVIDIA XID N from NVML; NvidiaXid: every XID), NvidiaGpuLost, Unhealthy. The list replaces the default; `default` in it stands for the default\'s codes (the application\'s XIDs among them)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l no-nvml -d 'Never load NVIDIA\'s NVML library (loading a library runs its code): procfs and sysfs alone describe NVIDIA GPUs, without MIG UUIDs or the cross-check. Without it, NVML is the system\'s with --root / and --driver-root /, else the driver root\'s libnvidia-ml.so.<version>, loaded only when it and every directory above it are owned by root and writable by root alone'
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -l print-slices -d 'Print the ResourceSlices this host would publish and exit'
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand dra-driver" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and not __fish_seen_subcommand_from create-symlinks enable-cuda-compat update-ldcache update-application-profile help" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and not __fish_seen_subcommand_from create-symlinks enable-cuda-compat update-ldcache update-application-profile help" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and not __fish_seen_subcommand_from create-symlinks enable-cuda-compat update-ldcache update-application-profile help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and not __fish_seen_subcommand_from create-symlinks enable-cuda-compat update-ldcache update-application-profile help" -f -a "create-symlinks" -d 'Create symbolic links in the container (TARGET is written as given; LINK is an absolute path in the container)'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and not __fish_seen_subcommand_from create-symlinks enable-cuda-compat update-ldcache update-application-profile help" -f -a "enable-cuda-compat" -d 'Enable CUDA forward compatibility when the image\'s compat driver is newer than the host\'s'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and not __fish_seen_subcommand_from create-symlinks enable-cuda-compat update-ldcache update-application-profile help" -f -a "update-ldcache" -d 'Update the container\'s linker cache (/etc/ld.so.cache) for the driver\'s library folders'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and not __fish_seen_subcommand_from create-symlinks enable-cuda-compat update-ldcache update-application-profile help" -f -a "update-application-profile" -d 'Show EGL and Vulkan only the container\'s GPUs, through the driver\'s application profiles'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and not __fish_seen_subcommand_from create-symlinks enable-cuda-compat update-ldcache update-application-profile help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from create-symlinks" -l link -d 'A link to create: TARGET::LINK, such as libcuda.so.1::/usr/lib64/libcuda.so (repeatable, at most 1024)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from create-symlinks" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from create-symlinks" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from create-symlinks" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from enable-cuda-compat" -l host-driver-version -d 'The host\'s driver version, such as 550.90.07' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from enable-cuda-compat" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from enable-cuda-compat" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from enable-cuda-compat" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from update-ldcache" -l folder -d 'A folder of driver libraries in the container, absolute and normalized (repeatable, at most 64)' -r
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from update-ldcache" -l ldconfig -d 'The host\'s ldconfig [default: the first of /sbin/ldconfig.real, /sbin/ldconfig, /usr/sbin/ldconfig that exists]' -r -F
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from update-ldcache" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from update-ldcache" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from update-ldcache" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from update-application-profile" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from update-application-profile" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from update-application-profile" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from help" -f -a "create-symlinks" -d 'Create symbolic links in the container (TARGET is written as given; LINK is an absolute path in the container)'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from help" -f -a "enable-cuda-compat" -d 'Enable CUDA forward compatibility when the image\'s compat driver is newer than the host\'s'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from help" -f -a "update-ldcache" -d 'Update the container\'s linker cache (/etc/ld.so.cache) for the driver\'s library folders'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from help" -f -a "update-application-profile" -d 'Show EGL and Vulkan only the container\'s GPUs, through the driver\'s application profiles'
complete -c cdigen -n "__fish_cdigen_using_subcommand hook; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c cdigen -n "__fish_cdigen_using_subcommand completions" -s v -l verbose -d 'Log more on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when set, takes precedence)'
complete -c cdigen -n "__fish_cdigen_using_subcommand completions" -s q -l quiet -d 'Log only errors on stderr'
complete -c cdigen -n "__fish_cdigen_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "generate" -d 'Discover devices and write CDI specs and device-info files'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "discover" -d 'Discover devices and print what was found, without writing anything'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "list" -d 'List the fully-qualified CDI device names (vendor/class=name) in the spec directories'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "validate" -d 'Validate CDI spec files and directories by the rules runtimes apply'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "check" -d 'Check that the specs and device-info files on disk are what generate would write now'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "inject" -d 'Show what a container gets when a runtime injects CDI devices, and what goes wrong'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "snapshot" -d 'Record what cdigen reads from this host into a fixture tree, for bug reports and tests'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "plugin" -d 'Act as a CDI plugin of the 2017 draft: allocate devices to request IDs'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "watch" -d 'Keep CDI specs and device-info files current while devices come and go'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "device-plugin" -d 'Serve the devices to the kubelet: a device plugin per resource (API v1beta1, with CDI devices)'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "dra-driver" -d 'Serve the devices through Dynamic Resource Allocation (resource.k8s.io/v1): publish them as ResourceSlices and prepare the claims the scheduler allocates from them'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "hook" -d 'Run as an OCI createContainer hook of a CDI spec: create-symlinks, enable-cuda-compat, update-ldcache'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "completions" -d 'Print a shell completion script (bash, zsh or fish) to stdout'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and not __fish_seen_subcommand_from generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and __fish_seen_subcommand_from hook" -f -a "create-symlinks" -d 'Create symbolic links in the container (TARGET is written as given; LINK is an absolute path in the container)'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and __fish_seen_subcommand_from hook" -f -a "enable-cuda-compat" -d 'Enable CUDA forward compatibility when the image\'s compat driver is newer than the host\'s'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and __fish_seen_subcommand_from hook" -f -a "update-ldcache" -d 'Update the container\'s linker cache (/etc/ld.so.cache) for the driver\'s library folders'
complete -c cdigen -n "__fish_cdigen_using_subcommand help; and __fish_seen_subcommand_from hook" -f -a "update-application-profile" -d 'Show EGL and Vulkan only the container\'s GPUs, through the driver\'s application profiles'
