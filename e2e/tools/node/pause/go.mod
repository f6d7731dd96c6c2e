module github.com/ferro-ipam/e2e/tools/node/pause

go 1.26.0
