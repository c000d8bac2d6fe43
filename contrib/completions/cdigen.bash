_cdigen() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="cdigen"
                ;;
            cdigen,check)
                cmd="cdigen__subcmd__check"
                ;;
            cdigen,completions)
                cmd="cdigen__subcmd__completions"
                ;;
            cdigen,device-plugin)
                cmd="cdigen__subcmd__device__subcmd__plugin"
                ;;
            cdigen,discover)
                cmd="cdigen__subcmd__discover"
                ;;
            cdigen,dra-driver)
                cmd="cdigen__subcmd__dra__subcmd__driver"
                ;;
            cdigen,generate)
                cmd="cdigen__subcmd__generate"
                ;;
            cdigen,help)
                cmd="cdigen__subcmd__help"
                ;;
            cdigen,hook)
                cmd="cdigen__subcmd__hook"
                ;;
            cdigen,inject)
                cmd="cdigen__subcmd__inject"
                ;;
            cdigen,list)
                cmd="cdigen__subcmd__list"
                ;;
            cdigen,plugin)
                cmd="cdigen__subcmd__plugin"
                ;;
            cdigen,snapshot)
                cmd="cdigen__subcmd__snapshot"
                ;;
            cdigen,validate)
                cmd="cdigen__subcmd__validate"
                ;;
            cdigen,watch)
                cmd="cdigen__subcmd__watch"
                ;;
            cdigen__subcmd__help,check)
                cmd="cdigen__subcmd__help__subcmd__check"
                ;;
            cdigen__subcmd__help,completions)
                cmd="cdigen__subcmd__help__subcmd__completions"
                ;;
            cdigen__subcmd__help,device-plugin)
                cmd="cdigen__subcmd__help__subcmd__device__subcmd__plugin"
                ;;
            cdigen__subcmd__help,discover)
                cmd="cdigen__subcmd__help__subcmd__discover"
                ;;
            cdigen__subcmd__help,dra-driver)
                cmd="cdigen__subcmd__help__subcmd__dra__subcmd__driver"
                ;;
            cdigen__subcmd__help,generate)
                cmd="cdigen__subcmd__help__subcmd__generate"
                ;;
            cdigen__subcmd__help,help)
                cmd="cdigen__subcmd__help__subcmd__help"
                ;;
            cdigen__subcmd__help,hook)
                cmd="cdigen__subcmd__help__subcmd__hook"
                ;;
            cdigen__subcmd__help,inject)
                cmd="cdigen__subcmd__help__subcmd__inject"
                ;;
            cdigen__subcmd__help,list)
                cmd="cdigen__subcmd__help__subcmd__list"
                ;;
            cdigen__subcmd__help,plugin)
                cmd="cdigen__subcmd__help__subcmd__plugin"
                ;;
            cdigen__subcmd__help,snapshot)
                cmd="cdigen__subcmd__help__subcmd__snapshot"
                ;;
            cdigen__subcmd__help,validate)
                cmd="cdigen__subcmd__help__subcmd__validate"
                ;;
            cdigen__subcmd__help,watch)
                cmd="cdigen__subcmd__help__subcmd__watch"
                ;;
            cdigen__subcmd__help__subcmd__hook,create-symlinks)
                cmd="cdigen__subcmd__help__subcmd__hook__subcmd__create__subcmd__symlinks"
                ;;
            cdigen__subcmd__help__subcmd__hook,enable-cuda-compat)
                cmd="cdigen__subcmd__help__subcmd__hook__subcmd__enable__subcmd__cuda__subcmd__compat"
                ;;
            cdigen__subcmd__help__subcmd__hook,update-application-profile)
                cmd="cdigen__subcmd__help__subcmd__hook__subcmd__update__subcmd__application__subcmd__profile"
                ;;
            cdigen__subcmd__help__subcmd__hook,update-ldcache)
                cmd="cdigen__subcmd__help__subcmd__hook__subcmd__update__subcmd__ldcache"
                ;;
            cdigen__subcmd__hook,create-symlinks)
                cmd="cdigen__subcmd__hook__subcmd__create__subcmd__symlinks"
                ;;
            cdigen__subcmd__hook,enable-cuda-compat)
                cmd="cdigen__subcmd__hook__subcmd__enable__subcmd__cuda__subcmd__compat"
                ;;
            cdigen__subcmd__hook,help)
                cmd="cdigen__subcmd__hook__subcmd__help"
                ;;
            cdigen__subcmd__hook,update-application-profile)
                cmd="cdigen__subcmd__hook__subcmd__update__subcmd__application__subcmd__profile"
                ;;
            cdigen__subcmd__hook,update-ldcache)
                cmd="cdigen__subcmd__hook__subcmd__update__subcmd__ldcache"
                ;;
            cdigen__subcmd__hook__subcmd__help,create-symlinks)
                cmd="cdigen__subcmd__hook__subcmd__help__subcmd__create__subcmd__symlinks"
                ;;
            cdigen__subcmd__hook__subcmd__help,enable-cuda-compat)
                cmd="cdigen__subcmd__hook__subcmd__help__subcmd__enable__subcmd__cuda__subcmd__compat"
                ;;
            cdigen__subcmd__hook__subcmd__help,help)
                cmd="cdigen__subcmd__hook__subcmd__help__subcmd__help"
                ;;
            cdigen__subcmd__hook__subcmd__help,update-application-profile)
                cmd="cdigen__subcmd__hook__subcmd__help__subcmd__update__subcmd__application__subcmd__profile"
                ;;
            cdigen__subcmd__hook__subcmd__help,update-ldcache)
                cmd="cdigen__subcmd__hook__subcmd__help__subcmd__update__subcmd__ldcache"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        cdigen)
            opts="-v -q -h -V --verbose --quiet --help --version generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__check)
            opts="-o -v -q -h --root --backend --driver-root --library-search-path --hook-path --no-nvml --generators --templates --generator --output-dir --devinfo-dir --spec-dir --format --output-format --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --backend)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --driver-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --library-search-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hook-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generators)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --templates)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generator)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --devinfo-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spec-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "json yaml" -- "${cur}"))
                    return 0
                    ;;
                --output-format)
                    COMPREPLY=($(compgen -W "text json yaml" -- "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -W "text json yaml" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__completions)
            opts="-v -q -h --verbose --quiet --help bash zsh fish"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__device__subcmd__plugin)
            opts="-v -q -h --root --backend --driver-root --library-search-path --hook-path --no-nvml --generators --templates --generator --output-dir --devinfo-dir --spec-dir --format --source --debounce --max-delay --interval --ready-file --lock-timeout --plugin-dir --pod-resources-socket --legacy-edits --pod-uid --ignore-health --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --backend)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --driver-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --library-search-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hook-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generators)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --templates)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generator)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --devinfo-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spec-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "json yaml" -- "${cur}"))
                    return 0
                    ;;
                --source)
                    COMPREPLY=($(compgen -W "auto udev netlink none" -- "${cur}"))
                    return 0
                    ;;
                --debounce)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-delay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ready-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --lock-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --plugin-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pod-resources-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pod-uid)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ignore-health)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__discover)
            opts="-o -v -q -h --root --backend --driver-root --library-search-path --hook-path --no-nvml --generators --generator --output-format --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --backend)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --driver-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --library-search-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hook-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generators)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generator)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output-format)
                    COMPREPLY=($(compgen -W "text json yaml" -- "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -W "text json yaml" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__dra__subcmd__driver)
            opts="-v -q -h --root --backend --driver-root --library-search-path --hook-path --no-nvml --generators --templates --generator --output-dir --devinfo-dir --spec-dir --format --source --debounce --max-delay --interval --ready-file --lock-timeout --driver-name --node --print-slices --plugin-dir --registry-dir --pod-uid --ignore-health --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --backend)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --driver-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --library-search-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hook-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generators)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --templates)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generator)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --devinfo-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spec-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "json yaml" -- "${cur}"))
                    return 0
                    ;;
                --source)
                    COMPREPLY=($(compgen -W "auto udev netlink none" -- "${cur}"))
                    return 0
                    ;;
                --debounce)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-delay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ready-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --lock-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --driver-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --node)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --plugin-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --registry-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pod-uid)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ignore-health)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__generate)
            opts="-v -q -h --root --backend --driver-root --library-search-path --hook-path --no-nvml --generators --templates --generator --output-dir --devinfo-dir --spec-dir --output --format --dry-run --diff --lock-timeout --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --backend)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --driver-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --library-search-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hook-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generators)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --templates)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generator)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --devinfo-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spec-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "json yaml" -- "${cur}"))
                    return 0
                    ;;
                --lock-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help)
            opts="generate discover list validate check inject snapshot plugin watch device-plugin dra-driver hook completions help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__check)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__completions)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__device__subcmd__plugin)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__discover)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__dra__subcmd__driver)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__generate)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__hook)
            opts="create-symlinks enable-cuda-compat update-ldcache update-application-profile"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__hook__subcmd__create__subcmd__symlinks)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__hook__subcmd__enable__subcmd__cuda__subcmd__compat)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__hook__subcmd__update__subcmd__application__subcmd__profile)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__hook__subcmd__update__subcmd__ldcache)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__inject)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__list)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__plugin)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__snapshot)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__validate)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__help__subcmd__watch)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__hook)
            opts="-v -q -h --verbose --quiet --help create-symlinks enable-cuda-compat update-ldcache update-application-profile help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__hook__subcmd__create__subcmd__symlinks)
            opts="-v -q -h --link --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --link)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__hook__subcmd__enable__subcmd__cuda__subcmd__compat)
            opts="-v -q -h --host-driver-version --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --host-driver-version)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__hook__subcmd__help)
            opts="create-symlinks enable-cuda-compat update-ldcache update-application-profile help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__hook__subcmd__help__subcmd__create__subcmd__symlinks)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__hook__subcmd__help__subcmd__enable__subcmd__cuda__subcmd__compat)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__hook__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__hook__subcmd__help__subcmd__update__subcmd__application__subcmd__profile)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__hook__subcmd__help__subcmd__update__subcmd__ldcache)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__hook__subcmd__update__subcmd__application__subcmd__profile)
            opts="-v -q -h --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__hook__subcmd__update__subcmd__ldcache)
            opts="-v -q -h --folder --ldconfig --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --folder)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ldconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__inject)
            opts="-o -v -q -h --spec-dir --root --output-format --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --spec-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output-format)
                    COMPREPLY=($(compgen -W "text json yaml" -- "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -W "text json yaml" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__list)
            opts="-o -v -q -h --spec-dir --discovered --root --backend --driver-root --library-search-path --hook-path --no-nvml --generators --templates --generator --output-format --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --spec-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --backend)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --driver-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --library-search-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hook-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generators)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --templates)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generator)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output-format)
                    COMPREPLY=($(compgen -W "text json yaml" -- "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -W "text json yaml" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__plugin)
            opts="-v -q -h --root --driver-root --generators --state-dir --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --driver-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generators)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__snapshot)
            opts="-v -q -h --root --driver-root --output --generators --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --driver-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generators)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__validate)
            opts="-o -v -q -h --output-format --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --output-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        cdigen__subcmd__watch)
            opts="-v -q -h --root --backend --driver-root --library-search-path --hook-path --no-nvml --generators --templates --generator --output-dir --devinfo-dir --spec-dir --format --source --debounce --max-delay --interval --ready-file --lock-timeout --verbose --quiet --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --backend)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --driver-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --library-search-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hook-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generators)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --templates)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --generator)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --devinfo-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spec-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "json yaml" -- "${cur}"))
                    return 0
                    ;;
                --source)
                    COMPREPLY=($(compgen -W "auto udev netlink none" -- "${cur}"))
                    return 0
                    ;;
                --debounce)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-delay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ready-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --lock-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _cdigen -o nosort -o bashdefault -o default cdigen
else
    complete -F _cdigen -o bashdefault -o default cdigen
fi
