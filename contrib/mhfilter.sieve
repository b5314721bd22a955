# Sieve (Dovecot Pigeonhole with the vnd.dovecot.execute extension): file
# near-duplicate mail in a folder of its own.
#
# The execute test pipes the message to the program and is true when it
# exits 0, which mhfilter --mda does for a duplicate; a new message (1) or
# an error (another status) is delivered as usual.  See mhfilter(1), MAIL
# AND NEWS.
#
# Pigeonhole runs only programs in sieve_execute_bin_dir, without shell
# arguments; put this wrapper there as "mhfilter-mda" (mode 0755):
#
#	#!/bin/sh
#	exec mhfilter -f mail --mda --db "$HOME/.mhfilter"
#
# and enable the extension in 90-sieve.conf:
#
#	sieve_extensions = +vnd.dovecot.execute
#	sieve_plugins = sieve_extprograms
#	sieve_execute_bin_dir = /usr/lib/dovecot/sieve-execute

require ["vnd.dovecot.execute", "fileinto", "mailbox"];

if execute :pipe "mhfilter-mda" {
	fileinto :create "Duplicates";
	stop;
}
