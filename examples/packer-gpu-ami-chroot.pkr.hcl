# Bake an AMI for accelerator nodes through a chroot, with Packer's
# amazon-chroot builder and the accel.nodes bake playbook.
#   sudo packer init examples/packer-gpu-ami-chroot.pkr.hcl
#   sudo packer build -var target_instance_type=g5.xlarge examples/packer-gpu-ami-chroot.pkr.hcl
#
# Packer runs on an EC2 instance, the build host. It attaches a volume made
# from the source AMI, mounts it at mount_path and provisions it through a
# chroot; no instance of the target type is launched. The chroot connection
# needs root on the build host ("Running ansible against amazon-chroot
# requires changing the Ansible connection to chroot and running Ansible as
# root/sudo": packer-plugin-amazon, docs/builders/chroot.mdx).
#
# In a chroot, the running kernel and the PCI bus are the BUILD HOST's. The
# bake takes neither:
#   - the hardware comes from accel_nodes_bake_instance_type and the EC2
#     catalog (a build host with other accelerators, or none, makes the same
#     image);
#   - the DKMS modules are built for the kernels installed in the image, every
#     one that could boot, never for the build host's kernel. Set
#     nvidia_driver_kernel_version or neuron_driver_kernel_version only to pin
#     one kernel.
# tests/chroot/bake.sh bakes this way in CI, on a debootstrapped root.
#
# On first boot accel-nodes-validate.service validates the node and writes
# /var/lib/accel-nodes/validation.json.
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
  description = "The instance type the AMI is for, e.g. g5.xlarge, p5.48xlarge or inf2.xlarge."
}

variable "mount_path" {
  type        = string
  default     = "/mnt/packer-amazon-chroot-volumes/accel-nodes"
  description = "Where the build host mounts the image's volume; the inventory names it. One path per concurrent build."
}

source "amazon-chroot" "ubuntu2404" {
  region        = var.region
  ami_name      = "accel-nodes-${var.target_instance_type}-{{timestamp}}"
  ena_support   = true
  sriov_support = true
  mount_path    = var.mount_path
  source_ami_filter {
    filters = {
      name                = "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*"
      virtualization-type = "hvm"
      root-device-type    = "ebs"
    }
    owners      = ["099720109477"]
    most_recent = true
  }
  # chroot_mounts and copy_files keep their defaults: /proc, /sys, /dev,
  # /dev/pts and binfmt_misc mounted, the build host's /etc/resolv.conf copied
  # in for the package downloads ("Chroot Mounts" in the builder's docs).
}

build {
  sources = ["source.amazon-chroot.ubuntu2404"]

  # The connection and inventory of the ansible provisioner's "chroot
  # communicator" section (packer-plugin-ansible, docs/provisioners/ansible.mdx).
  # The inventory is written through inventory_file_template rather than a
  # second --inventory-file: the provisioner's own inventory names 127.0.0.1,
  # which the chroot connection would take for a directory, and Ansible since
  # 2.4 keeps both inventories (hashicorp/packer#5940).
  provisioner "ansible" {
    playbook_file           = "playbooks/bake.yml"
    inventory_file_template = "default ansible_host=${var.mount_path}\n"
    ansible_env_vars        = ["ANSIBLE_PIPELINING=True"]
    extra_arguments = [
      "--connection=chroot",
      "-e", "accel_nodes_bake_instance_type=${var.target_instance_type}",
    ]
  }
}
