# What `cmake --install` puts where, and the Debian package made from it by
# `cmake --build build --target package` (CPack DEB). Binaries are marked with
# farm_binary(... INSTALL ...); this file adds the data every binary finds by
# its own path (/usr/bin/../share/iommu-farm), the systemd units and the
# maintainer scripts that make the service user. scripts/check-package
# installs the result into a fresh Debian root and runs it from /usr/bin.
set(FARM_SHARE_DIR ${CMAKE_INSTALL_DATADIR}/iommu-farm)

install(FILES ${CMAKE_SOURCE_DIR}/emu/model/catalogs/linux-iommu.yaml
        DESTINATION ${FARM_SHARE_DIR}/catalogs COMPONENT farm)
install(FILES ${CMAKE_SOURCE_DIR}/dashboards/iommu-farm.json
              ${CMAKE_SOURCE_DIR}/dashboards/prometheus-rules.yml
              ${CMAKE_SOURCE_DIR}/dashboards/alertmanager.yml
        DESTINATION ${FARM_SHARE_DIR}/dashboards COMPONENT farm)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/dashboards/provisioning/
        DESTINATION ${FARM_SHARE_DIR}/grafana/provisioning COMPONENT farm)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/farm.env.example
        DESTINATION ${FARM_SHARE_DIR} COMPONENT farm)
# What a vm agent (deploy/systemd/farm-agent-vm.service) needs besides the
# binary: the guest root builder and the guest's init, which the builder finds
# beside itself (/usr/lib/iommu-farm/guest/init) as it finds
# agent/kernels/guest/init in the source tree.
install(PROGRAMS ${CMAKE_SOURCE_DIR}/scripts/build-guest-root
        DESTINATION lib/iommu-farm COMPONENT farm)
install(PROGRAMS ${CMAKE_SOURCE_DIR}/agent/kernels/guest/init
        DESTINATION lib/iommu-farm/guest COMPONENT farm)
# Debian's systemd looks in /lib/systemd/system for packaged units (bookworm
# has not merged it into /usr/lib for packages yet).
file(GLOB FARM_UNITS ${CMAKE_SOURCE_DIR}/deploy/systemd/*.service)
install(FILES ${FARM_UNITS} DESTINATION /lib/systemd/system COMPONENT farm)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME iommu-farm)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "iommu-farm developers <iommu-farm@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "benchmark farm for the Linux IOMMU / DMA-mapping path")
set(CPACK_PACKAGE_DESCRIPTION
    "Schedules kernel commit x workload x IOMMU mode matrices over host agents, runs them on an\n"
    "IOMMU emulator or as real fio/iozone runs, finds and bisects regressions.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
# Debug info stays in the build tree; the package carries stripped binaries.
set(CPACK_STRIP_FILES ON)
# The shared libraries (gRPC, protobuf, libpqxx, ...) become Depends through
# dpkg-shlibdeps; adduser makes the service user in postinst.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
# A vm agent's tools: QEMU, the guest root's (busybox-static, cpio, fio; the
# host's packages as dpkg names them for the arm64 root), and the kernel
# builder's toolchain (lib/kbuild: git, both architectures and the static
# dma_map_benchmark tool).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS
    "qemu-system-x86, qemu-system-arm, busybox-static, cpio, fio, iozone3, git, gcc, make, bc, flex, bison, libelf-dev, libssl-dev, xz-utils, gcc-aarch64-linux-gnu, libc6-dev-arm64-cross")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS
    "postgresql-15, prometheus, prometheus-alertmanager, kexec-tools")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/deploy/debian/postinst ${CMAKE_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
