-- miltertest script for tests/e2e/milter.bats: send one message to the
-- milter at SOCK and check its answer.
--   SOCK    the milter's socket (unix:PATH)
--   MSGID   the Message-ID; BODY: "budget" (default), "other" (another
--           text, the same Subject) or "reply" (new text above the budget
--           text quoted)
--   RCPTS   the envelope recipients, local parts at example.org separated
--           by commas (default: miltertest's own)
--   QID     the MTA's queue id (macro i)
--   EXPECT  unique, duplicate (a header), reject (550 5.7.1), discard,
--           quarantine (and a header), accept (no header), tempfail,
--           unchecked (a header with reason=REASON), removed (continue,
--           the recipients of REMOVED removed and no other, a header
--           X-Mhfilter: HEADER, default unique)
local bodies = {
	budget = "The committee approved the budget for the coming year " ..
	    "after a long debate.\r\nThe vote was 7 to 2, and the plan " ..
	    "takes effect in January.\r\n",
	other = "Flood warnings were issued for three rivers in the north " ..
	    "after a week of heavy rain.\r\n",
	reply = "Thanks, that is good news for the library, and I will " ..
	    "tell the readers' group on Thursday evening.\r\n\r\n" ..
	    "On Tue, 3 Mar 2026, Alice wrote:\r\n" ..
	    "> The committee approved the budget for the coming year " ..
	    "after a long debate.\r\n> The vote was 7 to 2, and the " ..
	    "plan takes effect in January.\r\n",
}
local function split(s)
	local t = {}
	if s then
		for w in string.gmatch(s, "[^,]+") do
			t[#t + 1] = "<" .. w .. "@example.org>"
		end
	end
	return t
end
local rcpts, removed = split(RCPTS), split(REMOVED)
local body = bodies[BODY or "budget"]
local conn = mt.connect(SOCK, 40, 0.25)
assert(conn, "cannot connect to " .. SOCK)
assert(mt.conninfo(conn, "localhost", "127.0.0.1") == nil)
if QID then
	mt.macro(conn, SMFIC_MAIL, "i", QID)
end
assert(mt.mailfrom(conn, "<alice@example.org>") == nil)
for _, r in ipairs(rcpts) do
	assert(mt.rcptto(conn, r) == nil)
end
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
if EXPECT ~= "removed" then
	-- Nobody is removed but by a "removed" answer.
	for _, x in ipairs(rcpts) do
		assert(not mt.eom_check(conn, MT_RCPTDELETE, x), x .. " removed")
	end
end
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
elseif EXPECT == "unchecked" then
	assert(r == SMFIR_CONTINUE, "not continue")
	assert(mt.eom_check(conn, MT_HDRINSERT, "X-Mhfilter",
	    "unchecked; reason=" .. REASON), "no unchecked header")
elseif EXPECT == "removed" then
	assert(r == SMFIR_CONTINUE, "not continue")
	assert(mt.eom_check(conn, MT_HDRINSERT, "X-Mhfilter",
	    HEADER or "unique"), "not the header expected")
	local gone = {}
	for _, x in ipairs(removed) do
		assert(mt.eom_check(conn, MT_RCPTDELETE, x), x .. " kept")
		gone[x] = true
	end
	for _, x in ipairs(rcpts) do
		assert(gone[x] or not mt.eom_check(conn, MT_RCPTDELETE, x),
		    x .. " removed")
	end
else
	error("EXPECT: " .. tostring(EXPECT))
end
if FORGED and EXPECT ~= "discard" and EXPECT ~= "reject" then
	assert(mt.eom_check(conn, MT_HDRDELETE, "X-Mhfilter"),
	    "the sender's X-Mhfilter field is kept")
end
mt.disconnect(conn)
