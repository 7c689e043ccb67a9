module github.com/samples/intset

go 1.19
