/* The pod sandbox's "pause" process of corral's test cluster: it holds the
 * pod's namespaces, reaps what is reparented to it, and exits on SIGINT or
 * SIGTERM. Built static into a FROM scratch image, so no registry is needed. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) {
	(void)sig;
	_exit(0);
}

static void reap(int sig) {
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = quit;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = reap;
	sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;)
		pause();
}
