// The pod sandbox's process (the image scripts/image.sh tags registry.k8s.io/pause:3.10): it holds
// the pod's namespaces open, reaps any orphan the pod's shared pid namespace hands it, and exits 0
// on SIGINT or SIGTERM. Static (CGO_ENABLED=0), so the image needs nothing but this binary.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
