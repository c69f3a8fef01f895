module github.com/mongoelector/mongoelector/capi/go

go 1.22
