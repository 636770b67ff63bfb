/*
 * event.h — one event on its way to clients, framed once per transport.
 *
 * An event read from a doorbell or from the stream is described by its
 * parts (pointing into the Redis reply that carried it). Each transport
 * frames it differently; the frame for a kind is built the first time a
 * recipient of that kind needs it and shared, by reference, by every other
 * recipient: fan-out costs one buffer per event and transport, not one per
 * client. Pure: no I/O.
 */
#ifndef TC_EVENT_H
#define TC_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "spell.h"

/**
 * How a transport frames events. TC_FRAME_PARTS is no client's: the event's
 * parts as they were stored (seq, method, the JSON without respelling) for a
 * reader inside the gateway, the run wing (run/feed.h), which parses the
 * JSON once instead of a client frame.
 */
enum tc_frame_kind { TC_FRAME_WS, TC_FRAME_SSE, TC_FRAME_PARTS, TC_FRAME_KINDS };

/**
 * One event on its way to clients: its parts (pointing into a Redis reply)
 * and, per transport kind and spelling, the frame built from them the first
 * time a client of that kind and spelling needs it — shared by every
 * recipient. Initialize the parts and zero the rest.
 */
struct tc_event {
	const char *epoch;
	uint64_t seq;
	const char *method, *ns, *json;
	size_t method_len, ns_len, json_len;
	struct tc_buf *frames[TC_FRAME_KINDS][TC_SPELLINGS];
	char *respelled[TC_SPELLINGS]; /**< the JSON respelled for sp, when it had to be */
	size_t respelled_len[TC_SPELLINGS];
	bool spelled[TC_SPELLINGS]; /**< respelled[sp] was worked out */
};

/**
 * The frame of ev for kind and spelling, built on first use and owned by ev
 * (take a reference to keep it). WebSocket:
 * {"type":"event","eventId":"<epoch>:<seq>","seq":<seq>, + the stored JSON
 * after its opening brace (event_id, and the data's protocol fields, spelled
 * as sp: spell.h). SSE: "id: <eventId>", "event: <method>" and the same JSON
 * as "data:" lines.
 */
struct tc_buf *tc_event_frame(struct tc_event *ev, enum tc_frame_kind kind, enum tc_spelling sp);

/** A TC_FRAME_PARTS frame read back: pointers into its buffer. */
struct tc_event_parts {
	uint64_t seq;
	const char *method, *json;
	size_t method_len, json_len;
};

/** Reads a TC_FRAME_PARTS frame; -1 when b is not one. */
int tc_event_parts_read(struct tc_buf *b, struct tc_event_parts *p);

/** Drops the frames (and respelled texts) ev built. */
void tc_event_release(struct tc_event *ev);

#endif
