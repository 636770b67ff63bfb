/*
 * lwsver.h — the libwebsockets versions threadcast is built and tested with,
 * and each place where it leans on how one behaves.
 *
 * Tested: 4.1.6 (Debian 12: scripts/test) and 4.3.5 (Debian 13: the unit
 * tests and the integration suites, README "Set-up"). Another version builds
 * with a warning (an error with -Dwerror=true): check the places below
 * against its source first. Each was read in both versions' source; the
 * tests named run on both builds.
 *
 * Alike in 4.1.6 and 4.3.5 (the code is the same on both):
 *   - handshake.h: every timeout, a header table's too, goes in one list
 *     sorted by expiry, walked on each insertion (lib/core-net/
 *     sorted-usec-list.c). reconnect.test.mjs, bench --quick's storm.
 *   - lwsmem.c: header tables are allocated as "ah struct" and "ah data"
 *     (lib/roles/http/parsers.c). test_lwsmem, limits.test.mjs.
 *   - server.c deflate_response(): "Sec-WebSocket-Extensions:
 *     permessage-deflate" is the last line when ADD_HEADERS is called
 *     (lib/roles/ws/server-ws.c). deflate.test.mjs.
 *   - server.c ESTABLISHED: no pss yet at CONFIRM_UPGRADE, a new one at
 *     ESTABLISHED; lws_set_extension_option() frees the inflater at each
 *     message's end. auth.test.mjs, deflate.test.mjs.
 *   - http.c, conn.h, chunked.h: a POST, PUT or PATCH without a length is
 *     taken to have a body of 100 MiB, and a chunked body comes framing and
 *     all (lib/roles/http/server/server.c). http.test.mjs, rest-http.test.mjs.
 *   - ws.c write_ping(): a PONG without payload is not reported
 *     (lib/roles/ws/ops-ws.c). limits.test.mjs (the idle timeout).
 *   - rest/exchange.c rest_writeable(): a run stream's header table is
 *     given back with lws_http_headers_detach() once its head is out (public
 *     in both; the transaction goes on without it). rest-http.test.mjs,
 *     rest-sdk.test.mjs, bench's c-viewers (3.8 KiB a viewer on 4.1.6).
 *   - ws.c write_close_frame() and conn.c tc__conn_update_rx(): kept on
 *     both; the double close and the stalled HTTP writes were seen on
 *     4.1.6, and the code that avoids them works on any version.
 *     limits.test.mjs, sse.test.mjs, rest-http.test.mjs.
 * Different:
 *   - TC_LWS_IDLE_STOPS_EARLY below (ws.c tc__ws_receive()).
 */
#ifndef TC_LWSVER_H
#define TC_LWSVER_H

#include <libwebsockets.h>

/** The libwebsockets version built against, as 4003000 for any 4.3 (the patch level left out). */
#define TC_LWS_VERSION (LWS_LIBRARY_VERSION_MAJOR * 1000000 + LWS_LIBRARY_VERSION_MINOR * 1000)

#if LWS_LIBRARY_VERSION_MAJOR != 4 || (LWS_LIBRARY_VERSION_MINOR != 1 && LWS_LIBRARY_VERSION_MINOR != 3)
#warning "libwebsockets other than 4.1 or 4.3: untested; src/lwsver.h lists what to check"
#endif

/**
 * 1 where lws' libuv idle handle, which services what an extension still
 * holds (the rest of a message that inflated to more than one piece), stops
 * after one round whether or not more is pending (4.1.6), 0 where it stops
 * only once nothing is (4.3.5: lws_uv_idle() asks lws_service_adjust_timeout()
 * first). deflate.test.mjs sends messages that inflate to many pieces.
 */
#define TC_LWS_IDLE_STOPS_EARLY (TC_LWS_VERSION < 4003000)

#endif
