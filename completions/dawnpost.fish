# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_dawnpost_global_optspecs
    string join \n config= log-json h/help V/version
end

function __fish_dawnpost_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_dawnpost_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_dawnpost_using_subcommand
    set -l cmd (__fish_dawnpost_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c dawnpost -n "__fish_dawnpost_needs_command" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_needs_command" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -s V -l version -d 'Print version'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "check" -d 'Validate all configuration, templates and the retention policy; print each report\'s next fires'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "migrate" -d 'Apply the ledger\'s pending migrations (on PostgreSQL a deploy step: no other command migrates unless `database.migrate = "auto"`); `--dry-run` lists them, each expand or contract; a contract migration waits (`--wait`) or refuses while live nodes or leases still need the old shape'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "plan" -d 'Print the fires (and job keys) in [--from, --to) without touching the ledger'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "backfill" -d 'Insert the jobs of every fire in [--from, --to); existing keys are left alone'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "enqueue" -d 'Insert one job for REPORT and a local date, ready at once'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "jobs" -d 'List jobs, newest date first'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "run" -d 'The daemon (scheduler, pool, rescuer) until SIGTERM/SIGINT; or, with --once, one date\'s reports: enqueue, work until finished, summarise, exit 0 (delivered), 3 (quarantined) or 4 (still pending)'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "show" -d 'The whole history of a job: states, artifact, every delivery and attempt, every redrive'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "dlq" -d 'Quarantined work: jobs and deliveries waiting for an operator'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "nodes" -d 'The live nodes on this ledger: id, version, the schema version and work formats each knows, when it started, its last heartbeat'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "sweep" -d 'Delete finished work past its retention (config/retention.toml)'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "redrive" -d 'Return quarantined work to the queue, with the same keys and an audit row'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "reissue" -d 'A new revision of a finished job, rendered from fresh source data and delivered to every destination again as a correction (emails threaded to the first revision\'s, webhooks naming the revision they supersede); the earlier revisions are kept. Audited'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "preview" -d 'Render what REPORT would send for a date (source fetched, CSS inlined, attachments) into files: HTML, text, CSV and the first recipient\'s .eml. Writes nothing to the ledger or the artifact store and sends nothing'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "bounce" -d 'Record the bounces or complaint of a delivery status notification (RFC 3464) or an abuse report (RFC 5965) read from stdin, as a mailbox\'s filter pipes it: each matched to its delivery, and its address suppressed as `[recipients]` says'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "suppressions" -d 'The suppressed recipients: who, for which reports, since when and why'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "suppress" -d 'Suppress ADDRESS (for every report, or --report): no report is sent to it. Audited'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "unsuppress" -d 'Lift the suppression of ADDRESS (for every report, or --report). Audited'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "send-test" -d 'Render REPORT for a date as its job would and email it to one address (--to), its subject led by "[test]". Audited; no job, recipient list, suppression or send_when decision counts it, and an address suppressed for the report is refused'
complete -c dawnpost -n "__fish_dawnpost_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand check" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand check" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand check" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand migrate" -l wait -d 'How long to wait for what keeps a contract migration from running (live nodes that do not know it, leases of the old meaning), with progress; then refuse, naming them' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand migrate" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand migrate" -l dry-run -d 'List the pending migrations (and what a contract one waits for) and apply nothing'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand migrate" -l expand-only -d 'Apply the expand migrations only (contract ones wait): the step before the nodes are upgraded'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand migrate" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand migrate" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand plan" -l from -d 'RFC 3339 instant or YYYY-MM-DD (midnight UTC)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand plan" -l to -d 'RFC 3339 instant or YYYY-MM-DD (midnight UTC); exclusive' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand plan" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand plan" -l json
complete -c dawnpost -n "__fish_dawnpost_using_subcommand plan" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand plan" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand backfill" -l from -d 'RFC 3339 instant or YYYY-MM-DD (midnight UTC)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand backfill" -l to -d 'RFC 3339 instant or YYYY-MM-DD (midnight UTC); exclusive' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand backfill" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand backfill" -l json
complete -c dawnpost -n "__fish_dawnpost_using_subcommand backfill" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand backfill" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand enqueue" -l date -d 'The report\'s local date, YYYY-MM-DD (default: today in the report\'s timezone)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand enqueue" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand enqueue" -l json
complete -c dawnpost -n "__fish_dawnpost_using_subcommand enqueue" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand enqueue" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand jobs" -l state -d 'ready, rendering, delivering, done, quarantined or cancelled' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand jobs" -l report -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand jobs" -l limit -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand jobs" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand jobs" -l json
complete -c dawnpost -n "__fish_dawnpost_using_subcommand jobs" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand jobs" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand run" -l date -d 'With --once: the local date (default: today in each report\'s timezone)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand run" -l max-wait -d 'With --once: how long to wait for scheduled retries' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand run" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand run" -l once -d 'Enqueue every report for one date and work until its jobs are finished'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand run" -l json
complete -c dawnpost -n "__fish_dawnpost_using_subcommand run" -l reveal -d 'With --once: print recipient addresses and webhook URLs in full'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand run" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand run" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand show" -l artifact -d 'Print this part of the job\'s artifact, read from the artifact store and checked against its sha256, instead of the history' -r -f -a "html\t''
text\t''
csv\t'The CSV attachment, when the report has one'"
complete -c dawnpost -n "__fish_dawnpost_using_subcommand show" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand show" -l json
complete -c dawnpost -n "__fish_dawnpost_using_subcommand show" -l reveal -d 'Print recipient addresses and webhook URLs in full'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand show" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand dlq" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand dlq" -l json
complete -c dawnpost -n "__fish_dawnpost_using_subcommand dlq" -l reveal -d 'Print recipient addresses and webhook URLs in full'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand dlq" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand dlq" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand nodes" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand nodes" -l json -d 'One JSON object per node (the contract of `crate::views::api::NodeV1`)'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand nodes" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand nodes" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand sweep" -l as-of -d 'Evaluate the policy as if now were T (RFC 3339 or YYYY-MM-DD)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand sweep" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand sweep" -l dry-run -d 'List what would be deleted, per class, with counts and bytes; delete nothing'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand sweep" -l json
complete -c dawnpost -n "__fish_dawnpost_using_subcommand sweep" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand sweep" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -l delivery -d 'Only this delivery of the job' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -l by -d 'Who is redriving' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -l reason -d 'Why' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -l report -d 'Bulk: the report whose quarantined deliveries to redrive' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -l class -d 'Bulk: their last error class (permanent, transient, ambiguous, rate_limited, unknown)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -l host -d 'Bulk: only deliveries to this host (an address\'s domain, a webhook\'s host:port, a chat destination\'s variable)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -l since -d 'Bulk: only deliveries quarantined at or after this instant (RFC 3339 or YYYY-MM-DD)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -l canary -d 'Bulk: deliveries the canary redrives first' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -l batch -d 'Bulk: deliveries per batch after the canary' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -l wait -d 'Bulk: how long to follow the runbook (the daemon sends its deliveries and carries it on after this command stops following)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -l dry-run -d 'Bulk: show what would be redriven, and stop'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand redrive" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand reissue" -l by -d 'Who is reissuing' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand reissue" -l reason -d 'Why (what was wrong with what went out)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand reissue" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand reissue" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand reissue" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand preview" -l date -d 'The report\'s local date, YYYY-MM-DD (default: today in its timezone)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand preview" -l out -d 'Where to write the files (default: `var/preview` in the project root)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand preview" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand preview" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand preview" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand bounce" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand bounce" -l json -d 'Print what was recorded as JSON'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand bounce" -l reveal -d 'Print recipient addresses in full'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand bounce" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand bounce" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand suppressions" -l limit -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand suppressions" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand suppressions" -l all -d 'The lifted suppressions too, with who lifted each and why'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand suppressions" -l json
complete -c dawnpost -n "__fish_dawnpost_using_subcommand suppressions" -l reveal -d 'Print recipient addresses in full'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand suppressions" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand suppressions" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand suppress" -l report -d 'For this report only (default: every report)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand suppress" -l by -d 'Who is doing it' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand suppress" -l reason -d 'Why' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand suppress" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand suppress" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand suppress" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand unsuppress" -l report -d 'For this report only (default: every report)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand unsuppress" -l by -d 'Who is doing it' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand unsuppress" -l reason -d 'Why' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand unsuppress" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand unsuppress" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand unsuppress" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand send-test" -l to -d 'The one address the test goes to' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand send-test" -l date -d 'The report\'s local date, YYYY-MM-DD (default: today in the report\'s timezone)' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand send-test" -l by -d 'Who is sending it' -r
complete -c dawnpost -n "__fish_dawnpost_using_subcommand send-test" -l config -d 'The configuration directory (dawnpost.toml, reports.toml, retention.toml)' -r -F
complete -c dawnpost -n "__fish_dawnpost_using_subcommand send-test" -l log-json -d 'Log as JSON lines instead of text'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand send-test" -s h -l help -d 'Print help'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "check" -d 'Validate all configuration, templates and the retention policy; print each report\'s next fires'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "migrate" -d 'Apply the ledger\'s pending migrations (on PostgreSQL a deploy step: no other command migrates unless `database.migrate = "auto"`); `--dry-run` lists them, each expand or contract; a contract migration waits (`--wait`) or refuses while live nodes or leases still need the old shape'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "plan" -d 'Print the fires (and job keys) in [--from, --to) without touching the ledger'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "backfill" -d 'Insert the jobs of every fire in [--from, --to); existing keys are left alone'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "enqueue" -d 'Insert one job for REPORT and a local date, ready at once'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "jobs" -d 'List jobs, newest date first'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "run" -d 'The daemon (scheduler, pool, rescuer) until SIGTERM/SIGINT; or, with --once, one date\'s reports: enqueue, work until finished, summarise, exit 0 (delivered), 3 (quarantined) or 4 (still pending)'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "show" -d 'The whole history of a job: states, artifact, every delivery and attempt, every redrive'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "dlq" -d 'Quarantined work: jobs and deliveries waiting for an operator'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "nodes" -d 'The live nodes on this ledger: id, version, the schema version and work formats each knows, when it started, its last heartbeat'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "sweep" -d 'Delete finished work past its retention (config/retention.toml)'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "redrive" -d 'Return quarantined work to the queue, with the same keys and an audit row'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "reissue" -d 'A new revision of a finished job, rendered from fresh source data and delivered to every destination again as a correction (emails threaded to the first revision\'s, webhooks naming the revision they supersede); the earlier revisions are kept. Audited'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "preview" -d 'Render what REPORT would send for a date (source fetched, CSS inlined, attachments) into files: HTML, text, CSV and the first recipient\'s .eml. Writes nothing to the ledger or the artifact store and sends nothing'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "bounce" -d 'Record the bounces or complaint of a delivery status notification (RFC 3464) or an abuse report (RFC 5965) read from stdin, as a mailbox\'s filter pipes it: each matched to its delivery, and its address suppressed as `[recipients]` says'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "suppressions" -d 'The suppressed recipients: who, for which reports, since when and why'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "suppress" -d 'Suppress ADDRESS (for every report, or --report): no report is sent to it. Audited'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "unsuppress" -d 'Lift the suppression of ADDRESS (for every report, or --report). Audited'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "send-test" -d 'Render REPORT for a date as its job would and email it to one address (--to), its subject led by "[test]". Audited; no job, recipient list, suppression or send_when decision counts it, and an address suppressed for the report is refused'
complete -c dawnpost -n "__fish_dawnpost_using_subcommand help; and not __fish_seen_subcommand_from check migrate plan backfill enqueue jobs run show dlq nodes sweep redrive reissue preview bounce suppressions suppress unsuppress send-test help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
