# Sieve (Dovecot Pigeonhole with the vnd.dovecot.execute extension): file
# near-duplicate mail in a folder of its own.
#
# The execute test pipes the message to the program; with --print-verdict
# mhfilter --mda prints its verdict (duplicate, unique, empty for one with
# no text to compare, or unchecked for a message it cannot judge: too
# large, too short, no header) and exits 0,
# so Dovecot logs no failure for an ordinary message.  Only "duplicate"
# files the message away; anything else, an error included (the test is
# then false), delivers as usual.  See mhfilter(1), MAIL AND NEWS.
#
# Pigeonhole runs only programs in sieve_execute_bin_dir, without shell
# arguments; put this wrapper there as "mhfilter-mda" (mode 0755):
#
#	#!/bin/sh
#	exec mhfilter -f mail --mda --print-verdict --db "$HOME/.mhfilter"
#
# and enable the extension in 90-sieve.conf:
#
#	sieve_extensions = +vnd.dovecot.execute
#	sieve_plugins = sieve_extprograms
#	sieve_execute_bin_dir = /usr/lib/dovecot/sieve-execute

require ["vnd.dovecot.execute", "variables", "fileinto", "mailbox"];

if execute :pipe :output "verdict" "mhfilter-mda" {
	if string :is "${verdict}" "duplicate" {
		fileinto :create "Duplicates";
		stop;
	}
}
