# Bake an AMI for GPU nodes with the accel.nodes bake playbook.
#   packer init examples/packer-gpu-ami.pkr.hcl
#   packer build -var target_instance_type=p3.2xlarge examples/packer-gpu-ami.pkr.hcl
# The build instance needs no GPU: the playbook installs for the target
# instance type, starts no service, never reboots, and cleans machine-id so
# every instance launched from the AMI boots as a new machine. On first boot
# accel-nodes-validate.service validates the node and writes
# /var/lib/accel-nodes/validation.json.
# The build instance boots the source AMI, so its running kernel is the
# image's own, and the driver module is built for it and every other kernel
# installed in the image. A chroot bake (the amazon-chroot example next to this
# one) runs on the build host's kernel instead, which is never a target there.
packer {
  required_plugins {
    amazon = {
      version = ">= 1.3.0"
      source  = "github.com/hashicorp/amazon"
    }
    ansible = {
      version = ">= 1.1.0"
      source  = "github.com/hashicorp/ansible"
    }
  }
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "target_instance_type" {
  type        = string
  description = "The instance type the AMI is for, e.g. p3.2xlarge or g5.xlarge."
}

variable "kernel_version" {
  type        = string
  default     = ""
  description = <<-EOT
    The one kernel the driver's DKMS module is built for (nvidia_driver_kernel_version,
    neuron_driver_kernel_version), e.g. 6.8.0-1024-aws; its headers must be installable.
    Empty: every kernel installed in the image that could boot, the running one included.
  EOT
}

source "amazon-ebs" "ubuntu2404" {
  region        = var.region
  instance_type = "m6i.large"
  ssh_username  = "ubuntu"
  ami_name      = "accel-nodes-${var.target_instance_type}-{{timestamp}}"
  source_ami_filter {
    filters = {
      name                = "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*"
      virtualization-type = "hvm"
    }
    owners      = ["099720109477"]
    most_recent = true
  }
}

build {
  sources = ["source.amazon-ebs.ubuntu2404"]

  provisioner "ansible" {
    playbook_file = "playbooks/bake.yml"
    user          = "ubuntu"
    use_proxy     = false
    extra_arguments = concat(
      [
        "--become",
        "-e", "accel_nodes_bake_instance_type=${var.target_instance_type}",
      ],
      var.kernel_version == "" ? [] : [
        "-e", "nvidia_driver_kernel_version=${var.kernel_version}",
        "-e", "neuron_driver_kernel_version=${var.kernel_version}",
      ],
    )
  }
}
