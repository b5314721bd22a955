-- miltertest script for tests/e2e/milter.bats: send one message to the
-- milter at SOCK and check its answer.
--   SOCK    the milter's socket (unix:PATH)
--   MSGID   the Message-ID; BODY: "budget" (default) or "other"
--   EXPECT  unique, duplicate (a header), reject (550 5.7.1), discard,
--           quarantine (and a header), accept (no header), tempfail
local bodies = {
	budget = "The committee approved the budget for the coming year " ..
	    "after a long debate.\r\nThe vote was 7 to 2, and the plan " ..
	    "takes effect in January.\r\n",
	other = "Flood warnings were issued for three rivers in the north " ..
	    "after a week of heavy rain.\r\n",
}
local body = bodies[BODY or "budget"]
local conn = mt.connect(SOCK, 40, 0.25)
assert(conn, "cannot connect to " .. SOCK)
assert(mt.conninfo(conn, "localhost", "127.0.0.1") == nil)
assert(mt.mailfrom(conn, "<alice@example.org>") == nil)
assert(mt.header(conn, "From", "Alice <alice@example.org>") == nil)
assert(mt.header(conn, "Message-ID", MSGID) == nil)
assert(mt.header(conn, "Date", "Tue, 3 Mar 2026 10:00:00 +0000") == nil)
assert(mt.header(conn, "Subject", "Re: Quarterly budget") == nil)
if FORGED then
	-- A verdict the sender wrote: removed.
	assert(mt.header(conn, "X-Mhfilter", "unique") == nil)
end
assert(mt.eoh(conn) == nil)
assert(mt.bodystring(conn, body) == nil)
if BIG then
	-- A body over --max-bytes.
	assert(mt.bodyrandom(conn, tonumber(BIG)) == nil)
end
assert(mt.eom(conn) == nil)
local r = mt.getreply(conn)
local hdr = mt.eom_check(conn, MT_HDRINSERT, "X-Mhfilter")
if EXPECT == "unique" then
	assert(r == SMFIR_CONTINUE, "not continue")
	assert(mt.eom_check(conn, MT_HDRINSERT, "X-Mhfilter", "unique"),
	    "no 'X-Mhfilter: unique'")
elseif EXPECT == "duplicate" then
	assert(r == SMFIR_CONTINUE, "not continue")
	assert(hdr and not mt.eom_check(conn, MT_HDRINSERT, "X-Mhfilter",
	    "unique"), "no duplicate header")
elseif EXPECT == "reject" then
	assert(r == SMFIR_REPLYCODE, "not a reply code")
	assert(mt.eom_check(conn, MT_SMTPREPLY, REPLY_CODE or "550",
	    REPLY_XCODE or "5.7.1", REPLY_TEXT or "Duplicate message"),
	    "not the reply asked for")
elseif EXPECT == "discard" then
	assert(r == SMFIR_DISCARD, "not discarded")
elseif EXPECT == "quarantine" then
	assert(r == SMFIR_CONTINUE, "not continue")
	assert(mt.eom_check(conn, MT_QUARANTINE), "not quarantined")
	assert(hdr, "no header")
elseif EXPECT == "accept" then
	assert(r == SMFIR_ACCEPT, "not accepted")
	assert(not hdr, "a header")
elseif EXPECT == "tempfail" then
	assert(r == SMFIR_TEMPFAIL, "not a temporary failure")
else
	error("EXPECT: " .. tostring(EXPECT))
end
if FORGED and EXPECT ~= "discard" and EXPECT ~= "reject" then
	assert(mt.eom_check(conn, MT_HDRDELETE, "X-Mhfilter"),
	    "the sender's X-Mhfilter field is kept")
end
mt.disconnect(conn)
