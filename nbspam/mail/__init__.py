"""Reading messages: files, folders, mboxes and URLs; MIME parsing, HTML to text, headers."""
