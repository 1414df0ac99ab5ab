"""The core: the domain's frozen records, its errors, the names shared with infra/, time
formatting, and the syntax rules of target URLs and AWS names. Imports nothing of ours outside it."""
