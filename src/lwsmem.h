/*
 * lwsmem.h — where libwebsockets' memory comes from.
 *
 * lws allocates every client's HTTP header table (a small struct and a
 * 4 KiB buffer) when its request starts and frees it once the connection
 * is upgraded. Taken from the heap, those tables leave holes between the
 * connections' long-lived state (wsi, receive buffer, session) that
 * nothing refills while the connections idle: at 10,000 idle WebSockets,
 * 40% of the process' heap was such holes. This allocator serves the header
 * tables from fixed 8 KiB slots of one reserved address range instead; a
 * freed slot keeps its pages for the next handshake until tc_lwsmem_trim()
 * hands the free slots' pages back to the kernel (after a storm settles:
 * tc__conn_trim_heap()); everything else lws allocates goes to malloc as
 * before.
 *
 * Sanitizer builds keep plain malloc, so ASan still watches every byte.
 */
#ifndef TC_LWSMEM_H
#define TC_LWSMEM_H

#include <stddef.h>

/** Installs the allocator into lws. Call once, before lws_create_context(). */
void tc_lwsmem_init(void);

/** Releases the address range; every lws context must be destroyed first. */
void tc_lwsmem_shutdown(void);

/** Gives the pages of every free slot back to the kernel; returns how many bytes. */
size_t tc_lwsmem_trim(void);

/** Slots in use now (header tables of handshakes in progress). */
size_t tc_lwsmem_slots_in_use(void);

#endif
