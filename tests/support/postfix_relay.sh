#!/usr/bin/env bash
# A private Postfix instance on loopback for dawnpost's tests (Debian's postfix; run as root):
# it listens on 127.0.0.1:RELAY_PORT, relays mail for carrier-y.example and dawnpost.test to the
# SMTP server on 127.0.0.1:NEXT_PORT, and mails its bounces (real RFC 3464 DSNs) to the sender
# there too. Its files live under DIR; `postfix -c DIR/etc stop` stops it.
#
#   postfix_relay.sh DIR RELAY_PORT NEXT_PORT
set -euo pipefail
dir=$1 relay_port=$2 next_port=$3
mkdir -p "$dir/etc" "$dir/queue" "$dir/data"
chmod 755 "$dir"
chown postfix "$dir/data"
cp /etc/postfix/master.cf "$dir/etc/master.cf"
# The smtpd listener on the test's port, and no service chrooted (the queue is not in /var).
sed -i -E "s/^smtp( +)inet( +)n( +)-( +)[yn]/127.0.0.1:$relay_port inet n - n/" "$dir/etc/master.cf"
sed -i -E 's/^([a-z]+ +(unix|unix-dgram|fifo|pass) +[-yn] +[-yn] +)y /\1n /' "$dir/etc/master.cf"
cat > "$dir/etc/main.cf" <<CONF
compatibility_level = 3.6
queue_directory = $dir/queue
data_directory = $dir/data
mail_owner = postfix
setgid_group = postdrop
maillog_file = $dir/maillog
maillog_file_prefixes = $dir
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = relay.dawnpost.test
mydomain = dawnpost.test
myorigin = \$myhostname
mydestination =
relay_domains =
alias_maps =
alias_database =
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject
smtp_dns_support_level = disabled
transport_maps = inline:{ {carrier-y.example = smtp:[127.0.0.1]:$next_port}, {dawnpost.test = smtp:[127.0.0.1]:$next_port} }
CONF
postfix -c "$dir/etc" check
postfix -c "$dir/etc" start
