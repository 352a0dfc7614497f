module github.com/awslabs/oci-add-hooks

go 1.25.0
