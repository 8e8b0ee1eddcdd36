# A message moved (or copied) out of Junk: learn it as ham, unless it went to the Trash.
# Dovecot's IMAPSieve runs this on COPY from Junk to any folder (see 90-nbspam-imapsieve.conf).
require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment", "variables"];

if environment :matches "imap.mailbox" "*" {
  set "mailbox" "${1}";
}
if string "${mailbox}" "Trash" {
  stop;
}
pipe :copy "nbspam-learn" ["ham"];
