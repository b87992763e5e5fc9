module etcd-lifecycle-agent/tools/images/pause

go 1.22
