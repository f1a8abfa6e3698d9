/*
 * gate — the listening socket in front of libmicrohttpd (gate.c): the
 * request-line check, connection limits (health answered over them), header
 * and body deadlines. Transport only.
 */
#ifndef TESSERA_SERVE_GATE_H
#define TESSERA_SERVE_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* ------------------------------------------------------------ gate */

/* Where a connection MHD holds is: its deadlines depend on it. */
typedef enum gate_phase {
    GATE_HEADERS = 0, /* waiting for a request's headers */
    GATE_BODY,        /* headers in, body arriving */
    GATE_BUSY,        /* request complete: being answered, no deadline */
    GATE_CUT          /* past a deadline: shut down, MHD is closing it */
} gate_phase;

typedef struct gate_conn gate_conn;
typedef struct serve_gate serve_gate;

typedef struct serve_gate_stats {
    uint64_t refused;           /* answered 429/503 over a connection limit */
    uint64_t timeouts;          /* 408s: a request line, headers or body too late */
    uint64_t bad_request_lines; /* 400/414/505 before MHD saw them */
    int64_t open;               /* connections MHD holds */
} serve_gate_stats;

typedef struct serve_gate_params {
    const char *host;
    int port;
    int max_conns;        /* connections handed to MHD at once */
    int max_conns_per_ip; /* of them from one address; 0: no limit */
    int header_timeout_ms, body_timeout_ms;
    /* Hand an accepted socket with a well-formed request line to MHD: 0, or
     * -1 when it was refused (the socket is closed then). */
    int (*admit)(void *cls, int fd, const struct sockaddr *sa, socklen_t len);
    /* The body (malloc'd) of GET /health or /metrics over the limits. */
    char *(*quick)(void *cls, const char *path, int *status, const char **ctype);
    void *cls;
} serve_gate_params;

/* Bind and listen (errors printed); serve_gate_start starts accepting. */
serve_gate *serve_gate_new(const serve_gate_params *p);
int serve_gate_start(serve_gate *g);
int serve_gate_port(const serve_gate *g);
/* Close the listening socket; later connections are refused by the OS,
 * idle kept-alive ones are closed. */
void serve_gate_stop_accepting(serve_gate *g);
void serve_gate_free(serve_gate *g);
/* MHD's side: the gate's record of the connection on fd (NULL: none), its
 * phase changes, and its end (before MHD closes the socket). */
gate_conn *serve_gate_find(serve_gate *g, int fd);
void serve_gate_phase(serve_gate *g, gate_conn *c, gate_phase phase);
void serve_gate_closed(serve_gate *g, gate_conn *c);
void serve_gate_stats_get(serve_gate *g, serve_gate_stats *out);
/* 0 for "METHOD SP TARGET SP HTTP/1.x", else the status to answer. */
int serve_gate_check_request_line(const char *line, size_t n);

#endif
