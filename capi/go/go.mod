module mongoelector.dev/go/mongoelector

go 1.22
