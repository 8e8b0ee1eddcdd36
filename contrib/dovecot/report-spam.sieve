# A message moved (or copied) into Junk: learn it as spam.
# Dovecot's IMAPSieve runs this on COPY into the Junk folder (see 90-nbspam-imapsieve.conf).
require ["vnd.dovecot.pipe", "copy", "imapsieve"];

pipe :copy "nbspam-learn" ["spam"];
